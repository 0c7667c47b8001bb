import { Webhook, WebhookVerificationError } from "standardwebhooks";

export interface PlinthEvent {
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/**
 * A receiver of Plinth's webhooks: verifies each delivery with the endpoint's secret (`whsec_…`,
 * from the create or rotate answer), hands every new message to `onEvent` once, and answers 204.
 */
export function webhookReceiver(secret: string, onEvent: (event: PlinthEvent) => void | Promise<void>) {
  const webhook = new Webhook(secret);
  const seen = new Set<string>(); // keep these in your database: an id repeats when Plinth retries
  return async (request: Request): Promise<Response> => {
    const body = await request.text(); // verify the raw body, before any JSON parsing
    let event: PlinthEvent;
    try {
      event = webhook.verify(body, {
        "webhook-id": request.headers.get("webhook-id") ?? "",
        "webhook-timestamp": request.headers.get("webhook-timestamp") ?? "",
        "webhook-signature": request.headers.get("webhook-signature") ?? "",
      }) as PlinthEvent;
    } catch (error) {
      if (error instanceof WebhookVerificationError) return new Response("bad signature", { status: 400 });
      throw error;
    }
    const id = request.headers.get("webhook-id") ?? "";
    if (!seen.has(id)) {
      seen.add(id);
      await onEvent(event);
    }
    return new Response(null, { status: 204 }); // any 2xx: delivered
  };
}

// Its own port (the API has 8080); https when given a certificate and key (then point Plinth's
// Webhooks:TrustedCaFile at the certificate, or at the CA that signed it).
if (import.meta.main) {
  const receive = webhookReceiver(process.env.PLINTH_WEBHOOK_SECRET ?? "", (event) => {
    console.log(event.type, JSON.stringify(event.data));
  });
  const { RECEIVER_CERT_FILE: cert, RECEIVER_KEY_FILE: key } = process.env;
  const server = Bun.serve({
    port: Number(process.env.RECEIVER_PORT ?? 4010),
    fetch: receive,
    ...(cert && key ? { tls: { cert: Bun.file(cert), key: Bun.file(key) } } : {}),
  });
  console.log(`listening on ${server.url}`);
}
