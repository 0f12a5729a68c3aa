-- Deferred trigger tenants_policy_version_recorded: a tenant's policy version never moves without
-- its policy_history row.
CREATE OR REPLACE FUNCTION public.idem_check_policy_version_recorded()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.policy_version IS DISTINCT FROM OLD.policy_version AND NOT EXISTS (
       SELECT 1 FROM public.policy_history
        WHERE tenant_id = NEW.tenant_id AND to_version = NEW.policy_version) THEN
    RAISE EXCEPTION 'idem: policy version % of tenant % has no policy_history row', NEW.policy_version, NEW.tenant_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NULL;
END $function$

