-- Down step of 0030_saml_assertions: the remembered SAML assertion ids go (an assertion accepted
-- before could then be replayed until it expires); nothing else changes.
DROP TABLE "saml_assertions";
