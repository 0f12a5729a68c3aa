-- Trigger webhook_deliveries_immutable: what a delivery sends, in which order and for which
-- operation is fixed when it is raised; only attempts and results are recorded.
CREATE OR REPLACE FUNCTION public.idem_webhook_delivery_immutable()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
  IF NEW.body IS DISTINCT FROM OLD.body OR NEW.sequence IS DISTINCT FROM OLD.sequence
     OR NEW.operation_id IS DISTINCT FROM OLD.operation_id OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
    RAISE EXCEPTION 'idem: what a webhook delivery sends is fixed when it is raised'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $function$

