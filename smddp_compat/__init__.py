"""smddp-compat."""
