"""`specbench kernels`, `specbench plot`, `specbench env` (see issue 4)."""
