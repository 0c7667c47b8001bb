import type { Socket, TCPSocketListener } from "bun";

/**
 * A TCP proxy in front of PostgreSQL that counts the statements clients send: simple-protocol
 * `Query` ('Q') and extended-protocol `Execute` ('E') messages. It measures a job runner's load on
 * the database exactly, without pg_stat_statements and without the stats collector's delay.
 */
export interface QueryCounter {
  port: number;
  count(): number;
  close(): void;
}

/** Writes all of `data`, queueing what the socket does not take now until it drains. */
class Pipe {
  queue: Uint8Array[] = [];
  constructor(readonly socket: Socket<unknown>) {}
  write(data: Uint8Array): void {
    if (this.queue.length > 0) {
      this.queue.push(data);
      return;
    }
    const written = this.socket.write(data);
    if (written < data.length) this.queue.push(data.subarray(written));
  }
  drain(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0] as Uint8Array;
      const written = this.socket.write(head);
      if (written < head.length) {
        this.queue[0] = head.subarray(written);
        return;
      }
      this.queue.shift();
    }
  }
}

interface Conn {
  upstream?: Pipe;
  downstream?: Pipe;
  pending: Uint8Array[];
  buffer: Buffer;
  started: boolean;
}

export async function startQueryCounter(target: { host: string; port: number }): Promise<QueryCounter> {
  let statements = 0;
  const parse = (conn: Conn, chunk: Uint8Array) => {
    conn.buffer = conn.buffer.length ? Buffer.concat([conn.buffer, chunk]) : Buffer.from(chunk);
    for (;;) {
      const b = conn.buffer;
      if (!conn.started) {
        // startup, SSLRequest or GSSENCRequest: int32 length, no type byte
        if (b.length < 8) return;
        const len = b.readInt32BE(0);
        if (b.length < len) return;
        const code = b.readInt32BE(4);
        if (code !== 80877103 && code !== 80877104) conn.started = true;
        conn.buffer = b.subarray(len);
        continue;
      }
      if (b.length < 5) return;
      const len = b.readInt32BE(1);
      if (b.length < len + 1) return;
      const type = String.fromCharCode(b[0] as number);
      if (type === "Q" || type === "E") statements++;
      conn.buffer = b.subarray(len + 1);
    }
  };

  const server: TCPSocketListener<Conn> = Bun.listen<Conn>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      async open(client) {
        const conn: Conn = { pending: [], buffer: Buffer.alloc(0), started: false };
        client.data = conn;
        const downstream = new Pipe(client as Socket<unknown>);
        conn.downstream = downstream;
        const upstream = await Bun.connect<undefined>({
          hostname: target.host,
          port: target.port,
          socket: {
            data(_s, data) {
              downstream.write(new Uint8Array(data));
            },
            drain() {
              conn.upstream?.drain();
            },
            close() {
              client.end();
            },
            error() {
              client.end();
            },
          },
        });
        conn.upstream = new Pipe(upstream as Socket<unknown>);
        for (const p of conn.pending) conn.upstream.write(p);
        conn.pending = [];
      },
      data(client, data) {
        const conn = client.data;
        parse(conn, data);
        if (conn.upstream) conn.upstream.write(new Uint8Array(data));
        else conn.pending.push(new Uint8Array(data));
      },
      drain(client) {
        client.data?.downstream?.drain();
      },
      close(client) {
        client.data?.upstream?.socket.end();
      },
      error(client) {
        client.data?.upstream?.socket.end();
      },
    },
  });
  return { port: server.port, count: () => statements, close: () => server.stop(true) };
}
