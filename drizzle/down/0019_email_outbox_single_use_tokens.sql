-- Down step of 0019_email_outbox_single_use_tokens: drops the e-mail outbox and the single-use
-- tokens. Messages not yet sent are lost (their jobs then skip), and every link in a message already
-- sent stops working.
DROP TABLE "single_use_tokens";--> statement-breakpoint
DROP TABLE "email_messages";
