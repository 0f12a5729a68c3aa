-- Trigger operations_guard_boundary: an operation's chain nonce and custodian reference, once
-- recorded, are final (C12, C16).
CREATE OR REPLACE FUNCTION public.idem_guard_operation_boundary()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF OLD.chain_nonce IS NOT NULL AND NEW.chain_nonce IS DISTINCT FROM OLD.chain_nonce THEN
    RAISE EXCEPTION 'idem: operation % chain nonce is final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.provider_ref IS NOT NULL AND NEW.provider_ref IS DISTINCT FROM OLD.provider_ref THEN
    RAISE EXCEPTION 'idem: operation % custodian reference is final', OLD.operation_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$

