import { html } from "hono/html";
import type { FlowView } from "../../jobs/admin/get-flow.ts";
import { actionButton, badge, type Html, notice, type Viewer } from "./layout.ts";

/**
 * Each job's depth in the flow (a job without parents on this page is 0; a child one more than its
 * deepest parent), so the flow is drawn in layers, parents left of their children.
 */
function layers(flow: FlowView): FlowView["items"][] {
  const depth = new Map<number, number>();
  const byId = new Map(flow.items.map((j) => [j.id, j]));
  const depthOf = (id: number, seen: Set<number>): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    const job = byId.get(id);
    if (!job || seen.has(id)) return -1;
    seen.add(id);
    const d = 1 + Math.max(-1, ...job.dependsOn.map((p) => depthOf(p, seen)));
    depth.set(id, d);
    return d;
  };
  const out: FlowView["items"][] = [];
  for (const job of flow.items) {
    const d = depthOf(job.id, new Set());
    const layer = out[d] ?? [];
    layer.push(job);
    out[d] = layer;
  }
  return out.filter((layer) => layer !== undefined);
}

/** A flow: its jobs by status, and its jobs (this page) in layers with their state and parents. */
export function flowView(input: { viewer: Viewer; flow: FlowView; done?: string }): Html {
  const { viewer, flow, done } = input;
  const keyOf = new Map(flow.items.map((j) => [j.id, j.flowKey ?? String(j.id)]));
  const unfinished = ["waiting", "pending", "failed", "processing"].some(
    (s) => (flow.counts[s as keyof FlowView["counts"]] ?? 0) > 0,
  );
  return html`${notice(done, "ok")}
<div class="actions">${
    unfinished
      ? actionButton(viewer, {
          action: `/console/flows/${flow.flowId}/cancel`,
          label: "Cancel the flow",
          danger: true,
        })
      : ""
  }</div>
<p>${flow.total} jobs: ${Object.entries(flow.counts).map(([status, n]) => html`${badge(status)} ${n} `)}</p>
<div class="flow" style="display:flex;gap:1rem;overflow-x:auto" aria-label="The flow's jobs, parents before children">${layers(
    flow,
  ).map(
    (layer, i) =>
      html`<section class="card" aria-label="Layer ${i + 1}"><h2>Step ${i + 1}</h2><ul>${layer.map(
        (job) =>
          html`<li><a href="/console/jobs/${job.id}">${job.flowKey ?? job.id}</a> ${badge(job.status)}${
            job.dependsOn.length > 0
              ? html`<br><span class="muted">after ${job.dependsOn
                  .slice(0, 5)
                  .map((p) => keyOf.get(p) ?? String(p))
                  .join(
                    ", ",
                  )}${job.dependsOn.length > 5 ? ` and ${job.dependsOn.length - 5} more` : ""}</span>`
              : ""
          }</li>`,
      )}</ul></section>`,
  )}</div>
${flow.nextCursor ? html`<p><a href="/console/flows/${flow.flowId}?cursor=${flow.nextCursor}">Next jobs</a></p>` : ""}`;
}
