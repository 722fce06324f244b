"""`specbench sweep`: synthetic-acceptance sweeps (see issue 2)."""
