import { createServer, type Server, Socket } from "node:net";

/**
 * A TCP proxy in front of a real server (PostgreSQL, Redis) that a test can cut and restore, to
 * see what Plinth does when a dependency goes away. `down()` refuses and resets connections;
 * `blackhole()` accepts but never answers (a hung network); `up()` forwards again, same port;
 * `failover()` forwards new connections while those `blackhole()` hung stay silent and open (no RST,
 * no FIN: the old server's address still drops every packet).
 */
export class TcpProxy {
  readonly port: number;
  #server: Server;
  #sockets = new Set<Socket>();
  #mode: "up" | "down" | "blackhole" = "up";
  #pairs = new Set<[Socket, Socket]>();

  private constructor(
    server: Server,
    port: number,
    readonly target: { host: string; port: number },
  ) {
    this.#server = server;
    this.port = port;
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const server = createServer((client) => proxy?.handle(client));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    if (!address || typeof address === "string") throw new Error("proxy has no port");
    proxy = new TcpProxy(server, address.port, target);
    return proxy;
  }

  private handle(client: Socket): void {
    this.#sockets.add(client);
    client.on("close", () => this.#sockets.delete(client));
    client.on("error", () => client.destroy());
    if (this.#mode === "down") {
      client.resetAndDestroy();
      return;
    }
    if (this.#mode === "blackhole") return;
    const upstream = new Socket();
    this.#sockets.add(upstream);
    upstream.on("close", () => {
      this.#sockets.delete(upstream);
      client.destroy();
    });
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    const pair: [Socket, Socket] = [client, upstream];
    this.#pairs.add(pair);
    client.on("close", () => this.#pairs.delete(pair));
    upstream.connect(this.target.port, this.target.host, () => {
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  /** Drops every open connection and refuses new ones. */
  down(): void {
    this.#mode = "down";
    for (const socket of this.#sockets) socket.resetAndDestroy();
  }

  /** Open connections stop carrying bytes (both kept open); new ones are accepted and ignored. */
  blackhole(): void {
    this.#mode = "blackhole";
    for (const [client, upstream] of this.#pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  /** Forwards again; connections left hanging by blackhole() are dropped so clients reconnect. */
  up(): void {
    if (this.#mode === "blackhole") for (const socket of this.#sockets) socket.resetAndDestroy();
    this.#mode = "up";
  }

  /**
   * New connections are forwarded again; those left hanging by blackhole() stay open and silent for
   * ever, as behind a failover whose old address drops packets: only the client's own timeouts end them.
   */
  failover(): void {
    this.#mode = "up";
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
