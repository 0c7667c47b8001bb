// The console's passkey ceremonies (docs/console.md, "Passkeys"): served as a file under the
// console's policy (script-src 'self', no inline script), over @simplewebauthn/browser's bundle
// (the global SimpleWebAuthnBrowser, loaded before this file).
(() => {
  const webauthn = window.SimpleWebAuthnBrowser;
  const status = document.getElementById("passkey-status");
  const show = (text) => {
    if (status) status.textContent = text;
  };

  /** POSTs JSON (or nothing) to this origin; the problem's detail as the error otherwise. */
  async function post(url, body, csrf) {
    const headers = {};
    if (csrf) headers["x-csrf-token"] = csrf;
    if (body !== undefined) headers["content-type"] = "application/json";
    const answer = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = answer.status === 204 ? null : await answer.json().catch(() => null);
    // RFC 9470: the operation wants a fresh second factor; the console's prompt asks for it, then
    // brings the user back to this page to do it again
    const challenge = answer.headers.get("www-authenticate") ?? "";
    if (answer.status === 401 && challenge.includes("insufficient_user_authentication")) {
      const back = window.location.pathname;
      window.location.assign(`/console/step-up?back=${encodeURIComponent(back)}`);
      throw new Error("A recent second factor is needed first.");
    }
    if (!answer.ok) throw new Error(data?.detail ?? `The server answered ${answer.status}.`);
    return data;
  }

  const refused = (error) =>
    error?.name === "NotAllowedError" ? "The passkey request was cancelled or timed out." : error.message;

  const add = document.getElementById("passkey-add");
  if (add) {
    add.addEventListener("submit", async (event) => {
      event.preventDefault();
      const csrf = add.elements.csrf.value;
      const name = add.elements.name.value;
      show("Follow your browser's prompt…");
      try {
        const options = await post("/api/auth/passkeys/register/options", undefined, csrf);
        const response = await webauthn.startRegistration({ optionsJSON: options });
        await post("/api/auth/passkeys/register/verify", { name, response }, csrf);
        window.location.assign("/console/passkeys?added");
      } catch (error) {
        show(`Not added: ${refused(error)}`);
      }
    });
  }

  // the second step of a password sign-in, proved with a passkey of the user's
  const step = document.getElementById("passkey-second-factor");
  if (step) {
    step.addEventListener("click", async () => {
      const { mfaToken, next } = step.dataset;
      show("Follow your browser's prompt…");
      try {
        const options = await post("/api/auth/passkeys/login/options", { mfaToken });
        const response = await webauthn.startAuthentication({ optionsJSON: options });
        const done = await post("/console/sign-in/passkey", { response, mfaToken, next });
        window.location.assign(done.next);
      } catch (error) {
        show(`Not signed in: ${refused(error)}`);
      }
    });
  }

  // the step-up prompt (step-up.ts): a passkey of the user's (POST /api/auth/passkeys/step-up/options)
  // proves the factor through POST /api/auth/mfa/step-up,
  // then the prompt's form (the change's own fields) is submitted as it stands
  const stepUp = document.getElementById("passkey-step-up");
  if (stepUp) {
    stepUp.addEventListener("click", async () => {
      const form = document.getElementById(stepUp.dataset.form);
      show("Follow your browser's prompt…");
      try {
        const csrf = form.elements.csrf.value;
        const options = await post("/api/auth/passkeys/step-up/options", undefined, csrf);
        const response = await webauthn.startAuthentication({ optionsJSON: options });
        await post("/api/auth/mfa/step-up", { passkey: response }, csrf);
        form.submit();
      } catch (error) {
        show(`Not confirmed: ${refused(error)}`);
      }
    });
  }

  const signIn = document.getElementById("passkey-sign-in");
  if (signIn) {
    const next = signIn.dataset.next ?? "/console";
    const run = async (autofill) => {
      const options = await post("/api/auth/passkeys/login/options", {});
      const response = await webauthn.startAuthentication({
        optionsJSON: options,
        useBrowserAutofill: autofill,
      });
      const done = await post("/console/sign-in/passkey", { response, next });
      window.location.assign(done.next);
    };
    signIn.addEventListener("click", () => {
      show("Follow your browser's prompt…");
      run(false).catch((error) => show(`Not signed in: ${refused(error)}`));
    });
    // conditional UI: the browser offers passkeys in the e-mail field's autofill
    webauthn
      .browserSupportsWebAuthnAutofill()
      .then((supported) => (supported ? run(true) : undefined))
      .catch(() => undefined);
  }
})();
