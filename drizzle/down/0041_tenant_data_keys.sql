-- Down step of 0041_tenant_data_keys. Refused while any tenant has a data key: every secret sealed
-- under one would stop opening for good once the table is gone (the code before 0041 cannot open
-- them either). Only an installation that never sealed a value under a data key rolls back.
DO $$ BEGIN
  IF EXISTS (SELECT 1 FROM "tenant_data_keys") THEN
    RAISE EXCEPTION 'tenant_data_keys holds data keys: secrets sealed under them would be lost; not rolled back';
  END IF;
END $$;--> statement-breakpoint
DROP TABLE "tenant_data_keys";
