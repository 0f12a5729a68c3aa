-- Trigger tenants_policy_version_step: a tenant's policy version moves one step forward at a time.
CREATE OR REPLACE FUNCTION public.idem_guard_policy_version()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.policy_version IS DISTINCT FROM OLD.policy_version
     AND NEW.policy_version IS DISTINCT FROM OLD.policy_version + 1 THEN
    RAISE EXCEPTION 'idem: a tenant''s policy version only moves one step forward (% to % refused)',
      OLD.policy_version, NEW.policy_version USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $function$

