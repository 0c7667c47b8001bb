ALTER TABLE "features" DROP CONSTRAINT "features_kind_check";--> statement-breakpoint
ALTER TABLE "features" ADD CONSTRAINT "features_kind_check" CHECK (kind in ('boolean', 'metered', 'rate'));