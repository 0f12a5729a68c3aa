-- I32-SIGNER: the signer service signs reconciliation reports with its own key, reading the run
-- itself (read-only, bound to the tenant by row-level security).
GRANT SELECT ON reconciliation_runs, reconciliation_run_figures TO idem_signer;
