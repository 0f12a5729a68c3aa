-- Issue 13 (recovery of missed events): the deposit watcher records the hash of the last block it
-- scanned beside its cursor, and scans back over a rewritten stretch; the custodian poller keeps its
-- position in the same table. The application role may update the hash like the position.
GRANT UPDATE (scanned_hash) ON chain_cursors TO idem_app;
