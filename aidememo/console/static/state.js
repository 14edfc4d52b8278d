// What the console knows of the project: every resource's latest revision and the history of
// commits in sequence order, both fed by the live feed's materialized batches (LIVE-2).

export class ProjectState {
  constructor() {
    this.resources = new Map(); // "kind/id" -> {kind, id, revision, seq, at, actor, body}
    this.history = []; // commits in sequence order: {seq, kind, id, revision, op, actor, at, body}
    this.head = 0;
    this.caughtUp = false;
    this.expired = new Set(); // handoff ids whose lease_expired notice arrived
  }

  // Applies one batch; returns the keys of the resources it changed.
  apply(batch) {
    const changed = [];
    for (const { change, resource } of batch.entries) {
      const kind = change.resource.kind;
      const id = change.resource.id;
      const key = kind + "/" + id;
      const present = resource.state.state === "present";
      const body = present ? resource.state.body : null;
      const entry = {
        seq: change.seq, kind, id, revision: change.revision, op: change.operation,
        actor: change.actor_id, at: change.committed_at_ms, body,
      };
      this.history.push(entry);
      if (present) {
        const first = this.resources.get(key);
        this.resources.set(key, { ...entry, firstSeq: first ? first.firstSeq : entry.seq });
      } else {
        this.resources.delete(key);
      }
      if (kind === "handoff") this.expired.delete(id);
      changed.push(key);
    }
    this.head = Math.max(this.head, batch.next_cursor.after_seq);
    if (!batch.has_more) this.caughtUp = true;
    return changed;
  }

  ofKind(kind) {
    const out = [];
    for (const value of this.resources.values()) if (value.kind === kind) out.push(value);
    return out;
  }

  get(kind, id) {
    return this.resources.get(kind + "/" + id);
  }

  // Every revision of one resource, oldest first.
  revisions(kind, id) {
    return this.history.filter((e) => e.kind === kind && e.id === id);
  }

  // Commits per bucket over the last `buckets * bucketMs` before `now`.
  activity(now, buckets, bucketMs) {
    const counts = new Array(buckets).fill(0);
    const start = now - buckets * bucketMs;
    for (let i = this.history.length - 1; i >= 0; i--) {
      const at = this.history[i].at;
      if (at < start) break;
      const at_bucket = Math.min(buckets - 1, Math.floor((at - start) / bucketMs));
      counts[at_bucket] += 1;
    }
    return counts;
  }
}

// Where a handoff stands now: its column on the board (HO-6: a lease is evaluated on read).
export function handoffColumn(body, now, expired) {
  if (body.status === "completed") return "completed";
  if (body.status === "accepted") {
    // A failed attempt stays accepted with its lease cleared, waiting for a new claim (HO-4).
    if (body.claim_expires_at_ms === null) return "released";
    if (expired || (body.claim_expires_at_ms !== null && body.claim_expires_at_ms <= now)) {
      return "expired";
    }
    return "claimed";
  }
  return "sent";
}
