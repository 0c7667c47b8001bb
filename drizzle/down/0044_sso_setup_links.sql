-- Down step of 0044_sso_setup_links. Set-up links handed out stop working (their page answers 404);
-- owners still reach single sign-on's set-up from the console's own navigation. Nothing else is lost.
DROP TABLE "sso_setup_links";
