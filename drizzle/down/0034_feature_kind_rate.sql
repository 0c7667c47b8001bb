-- Down step of 0034_feature_kind_rate: the rate features (rate_limit_per_minute) go with their plan
-- entries and tenant overrides (never in the usage ledger), and a feature is boolean or metered again.
DELETE FROM "features" WHERE "kind" = 'rate';--> statement-breakpoint
ALTER TABLE "features" DROP CONSTRAINT "features_kind_check";--> statement-breakpoint
ALTER TABLE "features" ADD CONSTRAINT "features_kind_check" CHECK (kind in ('boolean', 'metered'));
