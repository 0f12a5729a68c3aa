-- I32-TRUST: the signer service follows its chain of trust itself: the decisions on the control
-- changes that activated passkeys, and who requested each withdrawal (read-only, bound to the
-- tenant by row-level security).
GRANT SELECT ON proposal_decisions, operation_transitions TO idem_signer;
