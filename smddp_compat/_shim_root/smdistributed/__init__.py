"""smdistributed alias provided by smddp-compat (not AWS's package): see smddp_compat.smdistributed_shim."""
