-- Down step of 0035_scim: the SCIM tables go (tokens, the directory's attributes of members, groups
-- and their members). The identities and memberships SCIM created stay, as any member does.
DROP TABLE "scim_group_members";--> statement-breakpoint
DROP TABLE "scim_groups";--> statement-breakpoint
DROP TABLE "scim_users";--> statement-breakpoint
DROP TABLE "scim_tokens";
