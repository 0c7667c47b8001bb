-- Down step of 0001_remove_message_broker: recreates the message-broker era's inbox/outbox tables,
-- empty (historical messages are not restored). Used by `bun run migrate --down` for a rollback.
CREATE TABLE "inbox_messages" (
	"id" uuid PRIMARY KEY NOT NULL,
	"message_type" text NOT NULL,
	"payload" jsonb NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"processed_at" timestamp with time zone,
	"error" text
);
--> statement-breakpoint
CREATE TABLE "outbox_messages" (
	"id" uuid PRIMARY KEY NOT NULL,
	"message_type" text NOT NULL,
	"payload" jsonb NOT NULL,
	"occurred_at" timestamp with time zone DEFAULT now() NOT NULL,
	"processed_at" timestamp with time zone,
	"error" text
);
