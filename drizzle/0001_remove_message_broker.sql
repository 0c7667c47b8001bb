DROP TABLE "inbox_messages" CASCADE;--> statement-breakpoint
DROP TABLE "outbox_messages" CASCADE;