import { markdownTable } from "../markdown-table.ts";
import { ACCOUNT_ACTIONS } from "./account-actions.ts";
import type { ActionRow, ActionRows } from "./action-row.ts";
import { MFA_ACTIONS } from "./mfa-actions.ts";
import { SCIM_ACTIONS } from "./scim-actions.ts";
import { SSO_ACTIONS } from "./sso-actions.ts";
import { TENANT_LIFECYCLE_ACTIONS } from "./tenant-lifecycle-actions.ts";

export type { ActionRow, ActionRows };

/**
 * The audit trail's own actions, each described once: with the actions the areas declare
 * (`defineArea({ auditActions })`, src/http/area.ts) they are what `recordAudit` accepts, the
 * console's filter and the action table of docs/audit.md (`bun run docs:audit`), in that order. A new
 * area declares its actions with the area, not here.
 */
const ACTIONS = {
  "auth.sign_in": [
    {
      what: "A user signed in.",
      outcome: "success",
      target: "`session`",
      details:
        "`method` (`password`, `sms`, `passkey`, `email_code`, `email_link`: a mailed code or link, `switch`: from another tenant's session, `invitation`: an accepted invitation, `signup`, `sso`: a finished single sign-on), `kind` (`token`, `browser`)",
      writtenBy:
        "`insertSessionIfUnchanged` (auth/sessions.ts): token and browser sessions, in the chain of the session's tenant",
    },
    {
      what: "A sign-in was refused (wrong password or code, unknown account).",
      outcome: "failure",
      target: "`user` (id or null)",
      details:
        "`method`, `email` (password, e-mail code) or `phone` (masked, SMS), `reason` (passkey: why it was refused; sso: the failed `check` in words, target `sso_connection`)",
      writtenBy:
        "`verifyCredentials`, `verifySmsCode`, `finishPasskeySignIn`, `verifyEmailCode`, `failSsoSignIn` (rate limited)",
    },
  ],
  "auth.sign_out": {
    what: "A user signed out.",
    target: "`session`",
    details: "`reason: logout`",
    writtenBy: "`logout`, `revokeCallerSession`",
  },
  "auth.password_changed": {
    what: "A user changed their password (every session of theirs ends).",
    target: "`user`",
    details: "—",
    writtenBy: "`changePassword`",
  },
  "auth.session_revoked": {
    what: "A session was ended by the system.",
    target: "`session`",
    details: "`reason` (`refresh token reuse`, `user not active`)",
    writtenBy: "`refreshSession` (actor: system `auth`)",
  },
  "auth.password_reset_requested": {
    what: "A password reset link was e-mailed to a user (an address without an account records nothing).",
    target: "`user`",
    details: "—",
    writtenBy: "`requestPasswordReset` (in the background, actor anonymous)",
  },
  "auth.password_reset": {
    what: "A user set a new password with a reset link (every session of theirs ends).",
    target: "`user`",
    details: "—",
    writtenBy: "`resetPassword` (actor anonymous: the link is the credential)",
  },
  "auth.email_verified": {
    what: "A user proved their address with a verification link.",
    target: "`user`",
    details: "—",
    writtenBy: "`verifyEmail`",
  },
  "auth.session_ended": {
    what: "A session was ended by its user, by a tenant owner or admin, or by a platform admin.",
    target: "`session`",
    details: "`reason`, `userId` (the session's user)",
    writtenBy: "`endUserSession`, `endOtherUserSessions`, `endMemberSessions`",
  },
  "auth.impersonation_started": {
    what: "A platform admin started a session as a tenant user (written in the tenant's chain and the platform's).",
    target: "`user`",
    details: "`reason`, `expiresAt`, `sessions` (the new session's id)",
    writtenBy: "`startImpersonation`",
  },
  ...MFA_ACTIONS,
  "user.created": {
    what: "A tenant user was added.",
    target: "`user`",
    details: "`role`",
    writtenBy: "`createTenantUser` (tenant owners/admins, platform admins)",
  },
  "user.disabled": {
    what: "A tenant user was disabled.",
    target: "`user`",
    details: "—",
    writtenBy: "`disableTenantUser`",
  },
  "user.deleted": {
    what: "A tenant user was removed.",
    target: "`user`",
    details: "—",
    writtenBy: "`deleteTenantUser`",
  },
  "invitation.created": {
    what: "An address was invited into the tenant with a role (its link mailed).",
    target: "`invitation`",
    details: "`email`, `role`",
    writtenBy: "`createInvitation` (tenant owners/admins)",
  },
  "invitation.resent": {
    what: "An invitation was mailed again with a new link (the old one stops working).",
    target: "`invitation`",
    details: "`email`",
    writtenBy: "`resendInvitation`",
  },
  "invitation.revoked": {
    what: "An invitation was revoked (its link stops working).",
    target: "`invitation`",
    details: "`email`",
    writtenBy: "`revokeInvitation`",
  },
  "invitation.accepted": {
    what: "An invitee accepted: a membership with the invited role (actor: the invitee).",
    target: "`invitation`",
    details: "`role`, `identity` (`existing`: a shared sign-in joined; `new`: an account created)",
    writtenBy: "`acceptInvitation` (POST /api/auth/invitations/accept)",
  },
  "user.role_changed": {
    what: "Reserved, not written yet: Plinth has no role change yet.",
    target: "`user`",
    details: "—",
    writtenBy: "—",
  },
  "api_key.created": {
    what: "An API key was created.",
    target: "`api_key`",
    details: "`name`, `scopes`, `prefix` (the public id part), `expiresAt`",
    writtenBy: "`createApiKey`",
  },
  "api_key.rolled": {
    what: "An API key got a new secret part.",
    target: "`api_key`",
    details: "`name`, `prefix`, `graceSeconds`",
    writtenBy: "`rollApiKey`",
  },
  "api_key.revoked": {
    what: "An API key was revoked.",
    target: "`api_key`",
    details: "`name`, `prefix`",
    writtenBy: "`revokeApiKey`",
  },
  "api_key.first_used": {
    what: "An API key was used for the first time.",
    target: "`api_key`",
    details: "—",
    writtenBy: "`markApiKeyUsed` (actor: the key, `apiKey`)",
  },
  "tenant_secret.put": {
    what: "A tenant secret was stored.",
    target: "`tenant_secret` (name)",
    details: "`name` (never the value)",
    writtenBy: "`putTenantSecret`",
  },
  "tenant_secret.deleted": {
    what: "A tenant secret was deleted.",
    target: "`tenant_secret` (name)",
    details: "`name`",
    writtenBy: "`deleteTenantSecret`",
  },
  "provider.set": {
    what: "A tenant's external provider was configured.",
    target: "`provider` (type)",
    details: "`kind` (the type), `provider`, `status`",
    writtenBy: "`putTenantProvider`",
  },
  "provider.disabled": {
    what: "A tenant's external provider was disabled.",
    target: "`provider` (type)",
    details: "`kind`, `status`",
    writtenBy: "`updateTenantProviderStatus`",
  },
  "provider.enabled": {
    what: "A tenant's external provider was enabled again.",
    target: "`provider` (type)",
    details: "`kind`, `status`",
    writtenBy: "`updateTenantProviderStatus`",
  },
  "domain.added": {
    what: "A custom domain was claimed.",
    target: "`domain`",
    details: "`hostname`",
    writtenBy: "`createCustomDomain`",
  },
  "domain.activated": {
    what: "A custom domain's records were verified: it is Active.",
    target: "`domain`",
    details: "`hostname`",
    writtenBy: "the tenant-domains loop (actor: system `tenant-domains`)",
  },
  "domain.removed": {
    what: "A custom domain was removed.",
    target: "`domain`",
    details: "`hostname`; `reason: claim expired` when the loop removes an expired claim",
    writtenBy: "`deleteCustomDomain`; `expireDomainClaims` (actor: system `tenant-domains`)",
  },
  ...SSO_ACTIONS,
  "subscription.event": {
    what: "A tenant's subscription changed.",
    target: "`subscription` (tenant id)",
    details: "`event`, `from`, `to`, `plan`, `reason` (the source: `admin`, `webhook`, `loop`)",
    writtenBy: "`applySubscriptionEvent`, the subscriptions loop (only when it changed something)",
  },
  "feature.override": {
    what: "A tenant's feature override was set or removed.",
    target: "`feature` (key)",
    details: "`feature`, `value` (enabled), `count` (limit), `reason`; or `status: removed`",
    writtenBy: "`updateFeatureOverride`, `deleteFeatureOverride`",
  },
  "webhook_endpoint.created": {
    what: "A webhook endpoint was added.",
    target: "`webhook_endpoint`",
    details: "`url` (scheme, host and port only: a path may hold a token), `events`",
    writtenBy: "`createWebhookEndpoint`",
  },
  "webhook_endpoint.updated": {
    what: "A webhook endpoint was changed, its secret rotated, or it was disabled for failing.",
    target: "`webhook_endpoint`",
    details:
      "what changed: `url`, `events`, `status` (`enabled`, `disabled`); `reason: signing secret rotated`; `status: disabled` with the `reason` when the delivery job disables a failing endpoint",
    writtenBy: "`updateWebhookEndpoint`, `rotateWebhookSecret`, the delivery job (actor: system `webhooks`)",
  },
  "webhook_endpoint.deleted": {
    what: "A webhook endpoint was deleted.",
    target: "`webhook_endpoint`",
    details: "`url` (origin)",
    writtenBy: "`deleteWebhookEndpoint`",
  },
  "webhook_endpoint.test_sent": {
    what: "A test event was sent to a webhook endpoint (an outbound POST to the tenant's URL).",
    target: "`webhook_endpoint`",
    details: "`url` (origin), `event` (the test event's id)",
    writtenBy: "`testWebhookEndpoint` (within `RateLimiting:WebhookTest`)",
  },
  "webhook_delivery.retried": {
    what: "A finished webhook delivery was sent once more.",
    target: "`webhook_delivery`",
    details: "`attempts` (the attempt queued), `event` (the event type)",
    writtenBy: "`retryDelivery`",
  },
  "webhook_endpoint.replayed": {
    what: "An endpoint's failed deliveries were queued again.",
    target: "`webhook_endpoint`",
    details: "`count` (deliveries queued), `from` (the `since` asked; the epoch when none)",
    writtenBy: "`replayFailedDeliveries`",
  },
  "audit.exported": {
    what: "An audit log was exported (NDJSON); written when the export starts, in the chain exported.",
    target: "`audit_chain` (a tenant id, `platform`; none for every chain)",
    details:
      "`filter` (the filters: `action=…`, `actor=…`, `from=…`, …), `count` (rows in the export's range)",
    writtenBy: "`exportAuditEvents` (tenant owners and admins, platform administrators)",
  },
  "job.retried": {
    what: "A dead job, or a selection of jobs, was queued again.",
    target: "`job` (id); none for a bulk retry",
    details: "`count`, `jobKind`; a bulk retry: `reason: bulk retry`, `status`, `kind` (its filter)",
    writtenBy:
      "`retryDeadJob`, `retryJobs` (through `jobAdminActed`, src/jobs/admin/job-admin-acted.ts; platform chain)",
  },
  "job.canceled": {
    what: "A job, or a selection of jobs, was canceled.",
    target: "`job` (id); none for a bulk cancel",
    details: "`count`, `jobKind`; a bulk cancel: `reason: bulk cancel`, `status`, `kind`",
    writtenBy:
      "`cancelJob`, `cancelJobs`, `cancelFlow` (a flow cancel: a bulk cancel whose filter is the flow; through `jobAdminActed`)",
  },
  "job.priority_changed": {
    what: "A job's priority was changed.",
    target: "`job` (id)",
    details: "`count`, `jobKind`, `value` (the new priority)",
    writtenBy: "`setJobPriority` (`PATCH /api/admin/jobs/{id}`, through `jobAdminActed`)",
  },
  "schedule.updated": {
    what: "A schedule was created, changed, paused or resumed.",
    target: "`schedule` (name)",
    details: "`kind`, `status` (`enabled` / `disabled`), `value` (the cron)",
    writtenBy: "`putSchedule` (PUT /api/admin/schedules/{name}, the console's Pause / Resume)",
  },
  "schedule.deleted": {
    what: "A schedule was deleted.",
    target: "`schedule` (name)",
    details: "—",
    writtenBy: "`deleteSchedule`",
  },
  "schedule.run": {
    what: "A schedule's job was enqueued now, out of its cadence.",
    target: "`schedule` (name)",
    details: "`kind`, `value` (the job id)",
    writtenBy: "`runScheduleNow` (POST …/run, the console's Run now)",
  },
  "domain.check_requested": {
    what: "A custom domain's check was asked for now, whatever its backoff.",
    target: "`domain`",
    details: "`hostname`",
    writtenBy: "`checkCustomDomain` (tenant and admin API, the console's Check now)",
  },
  "platform_user.created": {
    what: "Platform staff were added.",
    target: "`user`",
    details: "`email`, `role` (`platform_admin` / `platform_viewer`)",
    writtenBy: "`createPlatformUser` (POST /api/admin/platform-users; platform chain)",
  },
  "tenant.signed_up": {
    what: "A tenant was made by self-serve sign-up, its verified address its owner (actor: anonymous, the link).",
    target: "`tenant`",
    details:
      "`code`, `ownerId`, `identity` (`existing`: a shared sign-in owns it; `new`: an account created)",
    writtenBy: "`completeSignUp` (POST /api/auth/signup/verify)",
  },
  "tenant.created": {
    what: "A tenant was created.",
    target: "`tenant`",
    details: "`code`",
    writtenBy: "`createTenant` (in the new tenant's chain)",
  },
  "tenant.suspended": {
    what: "A tenant was suspended.",
    target: "`tenant`",
    details: "—",
    writtenBy: "`suspendTenant`",
  },
  ...TENANT_LIFECYCLE_ACTIONS,
  ...ACCOUNT_ACTIONS,
  "platform.bootstrapped": {
    what: "The first platform administrator was created.",
    target: "`user`",
    details: "`email`, `role`",
    writtenBy: "`bootstrapPlatformAdmin` (`migrate --bootstrap-platform-admin`; actor: system `bootstrap`)",
  },
  "authorization.refused": {
    what: "A signed-in caller (a user or an API key) was refused: 403 `forbidden`.",
    outcome: "denied",
    target: "—",
    details: "`httpMethod`, `path`, `reason`",
    writtenBy: "`app.onError` for every 403 `forbidden` to a signed-in caller (rate limited)",
  },
  ...SCIM_ACTIONS,
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;

/**
 * The actions of the listed areas, by name: src/http/area-registry.ts fills it in (declaration
 * merging), so that `recordAudit` takes an area's action once src/http/areas.ts lists the area.
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled in by src/http/area-registry.ts
export interface AreaAuditActions {}

export type AuditAction = keyof typeof ACTIONS | keyof AreaAuditActions;

/** The trail's own actions, in the order docs/audit.md lists them (the areas' follow: area-registry.ts). */
export const TRAIL_AUDIT_ACTIONS = Object.keys(ACTIONS) as readonly AuditAction[];

/** The action table of docs/audit.md: the trail's actions, then each area's (a test keeps them equal). */
export function renderAuditActions(areaActions: readonly ActionRows[]): string {
  const rows: string[][] = [];
  for (const actions of [ACTIONS, ...areaActions])
    for (const [action, described] of Object.entries(actions)) {
      for (const row of [described].flat() as readonly ActionRow[]) {
        const name = row.outcome ? `\`${action}\` (${row.outcome})` : `\`${action}\``;
        rows.push([name, row.what, row.target, row.details, row.writtenBy]);
      }
    }
  return `${markdownTable(["action", "what", "target", "details", "written by"], rows).join("\n")}\n`;
}

const TABLE_BEGINS =
  "<!-- The action table is generated from src/audit/actions.ts by `bun run docs:audit`; do not edit it by hand. -->";
const TABLE_ENDS = "<!-- End of the generated action table. -->";

/** docs/audit.md with its action table (between the two markers) rendered afresh. */
export function withAuditActionTable(markdown: string, areaActions: readonly ActionRows[]): string {
  const begins = markdown.indexOf(TABLE_BEGINS);
  const ends = markdown.indexOf(TABLE_ENDS);
  if (begins < 0 || ends < begins) throw new Error("docs/audit.md lost the markers of its action table");
  return `${markdown.slice(0, begins + TABLE_BEGINS.length)}\n\n${renderAuditActions(areaActions)}\n${markdown.slice(ends)}`;
}
