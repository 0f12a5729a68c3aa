-- BEFORE INSERT trigger of audit_log (audit_log_chain): chains the row to its tenant's log. Locks
-- the tenant's chain head (audit_chain_heads, FOR UPDATE), so one tenant's inserts serialise
-- until each commits; sets the row's position, previous hash and hash whatever the inserter sent,
-- so no login writes an unchained row; moves the head. SECURITY DEFINER as idem_audit, the only
-- role that may write the heads.
CREATE OR REPLACE FUNCTION public.idem_audit_chain()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
  head_position bigint;
  head_hash text;
BEGIN
  SELECT h.position, h.hash INTO head_position, head_hash
    FROM public.audit_chain_heads h WHERE h.tenant_id = NEW.tenant_id FOR UPDATE;
  IF NOT FOUND THEN
    -- A tenant's first row: two first inserts at once meet on the primary key; the second waits
    -- for the first to commit, inserts nothing, and reads (and locks) the head the first left.
    INSERT INTO public.audit_chain_heads (tenant_id, position, hash)
      VALUES (NEW.tenant_id, 0, repeat('0', 64)) ON CONFLICT (tenant_id) DO NOTHING;
    SELECT h.position, h.hash INTO STRICT head_position, head_hash
      FROM public.audit_chain_heads h WHERE h.tenant_id = NEW.tenant_id FOR UPDATE;
  END IF;
  NEW.chain_position := head_position + 1;
  NEW.prev_hash := head_hash;
  NEW.hash := public.idem_audit_entry_hash(NEW.prev_hash, NEW.tenant_id, NEW.entry_id,
    NEW.chain_position, NEW.at, NEW.actor, NEW.action, NEW.outcome, NEW.source_address,
    NEW.request_id, NEW.details);
  UPDATE public.audit_chain_heads SET position = NEW.chain_position, hash = NEW.hash
    WHERE tenant_id = NEW.tenant_id;
  RETURN NEW;
END
$function$
