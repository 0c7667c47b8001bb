// Generated from the defineArea(…) declarations of src/http/ by `bun run areas:generate`; do not edit by hand.
import { emailOutboxArea } from "./console/pages-outbox.ts";
import { overviewArea } from "./console/pages-overview.ts";
import { billingArea } from "./routes/admin-billing.ts";
import { flowsArea } from "./routes/admin-flows.ts";
import { impersonationsArea } from "./routes/admin-impersonations.ts";
import { jobsArea } from "./routes/admin-jobs.ts";
import { platformUsersArea } from "./routes/admin-platform-users.ts";
import { providersArea } from "./routes/admin-providers.ts";
import { schedulesArea } from "./routes/admin-schedules.ts";
import { secretsArea } from "./routes/admin-secrets.ts";
import { tenantsArea } from "./routes/admin-tenants.ts";
import { apiKeysArea } from "./routes/api-keys.ts";
import { auditArea } from "./routes/audit.ts";
import { authArea } from "./routes/auth.ts";
import { emailChangeArea } from "./routes/auth-email-change.ts";
import { emailSignInArea } from "./routes/auth-email-sign-in.ts";
import { authMfaArea } from "./routes/auth-mfa.ts";
import { passkeysArea } from "./routes/auth-passkeys.ts";
import { authRecoveryArea } from "./routes/auth-recovery.ts";
import { memberSessionsArea, sessionsArea } from "./routes/auth-sessions.ts";
import { customDomainsArea } from "./routes/custom-domains.ts";
import { emailDomainsArea } from "./routes/email-domains.ts";
import { invitationsArea } from "./routes/invitations.ts";
import { membershipsArea } from "./routes/memberships.ts";
import { mfaResetArea } from "./routes/mfa-reset.ts";
import { paymentWebhooksArea } from "./routes/payment-webhooks.ts";
import { plansArea } from "./routes/plans.ts";
import { problemsArea } from "./routes/problems.ts";
import { scimArea } from "./routes/scim.ts";
import { scimGroupsArea } from "./routes/scim-groups.ts";
import { scimTokensArea } from "./routes/scim-tokens.ts";
import { securityPolicyArea } from "./routes/security-policy.ts";
import { signUpArea } from "./routes/sign-up.ts";
import { ssoConnectionsArea } from "./routes/sso-connections.ts";
import { ssoSamlArea } from "./routes/sso-saml.ts";
import { ssoSetupLinksArea } from "./routes/sso-setup-links.ts";
import { ssoSignInArea } from "./routes/sso-sign-in.ts";
import { featuresArea } from "./routes/tenant-features.ts";
import { tenantLifecycleArea } from "./routes/tenant-lifecycle.ts";
import { tenantSettingsArea } from "./routes/tenant-settings.ts";
import { storageArea } from "./routes/tenant-storage.ts";
import { adminUsersArea, tenantUsersArea } from "./routes/users.ts";
import { webhooksArea } from "./routes/webhooks.ts";
import { wellKnownArea } from "./routes/well-known.ts";

/** Every area (src/http/area.ts), in the order the app mounts them: a new one goes at the end. */
export const AREAS = [
  overviewArea,
  wellKnownArea,
  problemsArea,
  authArea,
  authRecoveryArea,
  emailSignInArea,
  authMfaArea,
  securityPolicyArea,
  mfaResetArea,
  emailChangeArea,
  sessionsArea,
  passkeysArea,
  memberSessionsArea,
  membershipsArea,
  impersonationsArea,
  invitationsArea,
  signUpArea,
  ssoSignInArea,
  emailDomainsArea,
  ssoSamlArea,
  adminUsersArea,
  platformUsersArea,
  jobsArea,
  flowsArea,
  schedulesArea,
  tenantUsersArea,
  apiKeysArea,
  scimTokensArea,
  scimArea,
  scimGroupsArea,
  tenantsArea,
  tenantSettingsArea,
  providersArea,
  secretsArea,
  storageArea,
  tenantLifecycleArea,
  customDomainsArea,
  billingArea,
  featuresArea,
  plansArea,
  paymentWebhooksArea,
  webhooksArea,
  auditArea,
  ssoConnectionsArea,
  emailOutboxArea,
  ssoSetupLinksArea,
] as const;
