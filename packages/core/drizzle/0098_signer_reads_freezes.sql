-- I33-FREEZE: the signer service reads the freezes itself, in the snapshot it checks the approval
-- in, and signs no new payment under one in force (read-only, bound to the tenant by row-level
-- security).
GRANT SELECT ON freezes TO idem_signer;
