"""Continuous-batching generation: many sequences share one batched forward, and keep their cache across turns.

Shape legend: R = engine rows (concurrent sequences), W = columns fed this step, L = MoE layers,
k = experts per token, S = DSA layers, k_s = selected tokens per query.

A sequence lives in one row from its first turn to `release`. Each step feeds every active row its newest
token (the last of a new turn's feed, or the token sampled last step) and samples the next one.
A row whose turn ended (stop token or length) parks with its cache; the next turn of the same sequence
appends only the new tokens (tool result, next generation prompt), so the history is not re-prefilled
and the tokens the learner sees are exactly the ones fed and sampled. The last sampled token of a turn
is fed at the start of the next one. When every row is taken and new sequences wait, the parked row
idle longest is evicted; its next turn re-prefills the kept token history into a fresh row.

Prefill beside the step: a row with more than one token to feed (a prompt, a tool result) gets all but the
last of them in a forward over only the rows that have such feeds (`ModelCache.take_rows` / `put_rows`),
right-aligned, shorter feeds padded (the model treats padding as absent). Fed with the step itself, a
40-token tool result of one row made all 32 rows compute 40 columns. Fresh rows with the same feed (the
samples of one prompt in a group) are prefilled once and the state copied. Turns of resident sequences are
admitted before new sequences, and a row the caller pinned (its tool calls run) is never evicted, so a
history is not fed twice.

Thinking budgets: inside `<think>` a row counts the thinking tokens of the current turn; when the count
reaches the turn's budget (what the sequence may still think; the agent loop passes what its episode has
left) the engine emits `</think>` itself (marked `forced`, so the learner can mask it out)
and the model goes on with its answer or tool call.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Hashable

import torch

from jointrl.model.generate import SamplingParams, sample_next
from jointrl.model.openings import MIN_SHARED, shared_openings
from jointrl.model.transformer import Transformer


@dataclass
class TurnRequest:
    """Generate one turn of a sequence: feed these tokens, then sample until a stop token or the limit."""

    seq_id: Hashable
    feed: list[int]  # new tokens before generating; the whole prompt on a sequence's first turn
    max_new_tokens: int
    sampling: SamplingParams  # temperature / top_p / top_k / stop_ids (its max_new_tokens is not used)
    think_budget: int | None = None  # thinking tokens this turn may generate (None = no limit)
    generator: torch.Generator | None = None  # this turn's own random stream (a request's seed); else the engine's
    banned: Callable[[list[int]], list[int]] | None = None  # ids the turn may not sample next, given its tokens so far


@dataclass
class TurnResult:
    """What one turn produced."""

    seq_id: Hashable
    tokens: list[int]  # generated ids, a forced </think> and the stop token included
    logprobs: list[float]  # behaviour log-prob of each generated token (forced ones: the model's own)
    forced: list[bool]  # True where the engine chose the token (thinking budget), not the policy
    versions: list[int]  # policy version each token was sampled with
    think_tokens: int  # tokens generated inside <think>...</think> this turn
    finish_reason: str  # "stop" | "length" | "context" (the model's max_seq_len was reached)
    routing: torch.Tensor | None = field(default=None, repr=False)  # [fed this turn, L, k]
    sparse_topk: torch.Tensor | None = field(default=None, repr=False)  # [fed this turn, S, k_s] token indices


@dataclass
class _Row:
    seq_id: Hashable
    request: TurnRequest
    pending: list[int]  # tokens to feed next step
    history: list[int] = field(default_factory=list)  # every token fed so far (to rebuild an evicted row)
    unfed: list[int] = field(default_factory=list)  # the last sampled token of a parked turn
    skip_record: int = 0  # leading fed tokens whose routing an earlier turn already recorded
    parked_at: int | None = None  # engine step at which the row's last turn ended
    pinned: bool = False  # parked, and its next turn is on the way: newcomers may not evict it
    active: bool = True
    inside_think: bool = False
    turn_think: int = 0  # thinking tokens of the current turn, against its request's budget
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    forced: list[bool] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    routing: list[torch.Tensor] = field(default_factory=list)
    topk: list[torch.Tensor] = field(default_factory=list)


class Engine:
    """Batched, cached, multi-turn sampling from one policy copy."""

    def __init__(
        self,
        model: Transformer,
        think_start_id: int,
        think_end_id: int,
        max_rows: int = 32,
        record_routing: bool = False,
        generator: torch.Generator | None = None,
        pad_id: int = 0,
        on_token: Callable[[Hashable, int, float], None] | None = None,
    ):
        self.model = model.eval()
        self.on_token = on_token  # called with (seq_id, token, log-prob) as each token is chosen (streaming)
        self.think_start_id, self.think_end_id = think_start_id, think_end_id
        self.max_rows = max_rows
        self.record_routing = record_routing
        self.generator = generator
        self.pad_id = pad_id
        self.version = 0  # bumped by weight sync; every token records the version it was sampled with
        self.cache = model.allocate_cache(max_rows, 64)
        self.rows: list[_Row | None] = [None] * max_rows
        self.evicted: dict[Hashable, _Row] = {}
        self.queue: deque[TurnRequest] = deque()
        self.steps = 0
        self.tokens_fed = 0

    # Lifecycle of sequences.

    def submit(self, request: TurnRequest) -> None:
        """Queue a turn; a sequence already holding a row continues there with its cache."""
        if request.max_new_tokens < 1:
            raise ValueError(f"{request.seq_id}: max_new_tokens must be >= 1, got {request.max_new_tokens}")
        row = self._row_of(request.seq_id)
        if row is not None and self.rows[row].active:
            raise ValueError(f"sequence {request.seq_id!r} is still generating its previous turn")
        self.queue.append(request)

    def release(self, seq_id: Hashable) -> None:
        """The sequence is over, or is cancelled mid-turn: free its row for another one."""
        row = self._row_of(seq_id)
        if row is not None:
            self.rows[row] = None
            # Its slots would otherwise count as real until a newcomer takes the row, and keep the cache long.
            self.cache.reset_rows([row])
        self.evicted.pop(seq_id, None)

    def pin(self, seq_id: Hashable) -> None:
        """Keep a parked sequence's row until its next turn is submitted (or it is released): the caller is
        preparing that turn (its tool calls run), so evicting the row would re-prefill its whole history."""
        row = self._row_of(seq_id)
        if row is not None and not self.rows[row].active:
            self.rows[row].pinned = True

    def resident(self, seq_id: Hashable) -> bool:
        """Whether the sequence still holds a row, so its next turn needs no re-prefill."""
        return self._row_of(seq_id) is not None

    @property
    def busy(self) -> bool:
        """Whether any turn is queued or generating."""
        return bool(self.queue) or any(r is not None and r.active for r in self.rows)

    def run(self, requests: list[TurnRequest]) -> list[TurnResult]:
        """Submit turns and step until all are done; results in request order."""
        for request in requests:
            self.submit(request)
        done: dict[Hashable, TurnResult] = {}
        while self.busy:
            for result in self.step():
                done[result.seq_id] = result
        return [done[r.seq_id] for r in requests]

    # One step.

    @torch.no_grad()
    def step(self) -> list[TurnResult]:
        """Admit queued turns into rows, run one batched forward, sample; return the turns that ended."""
        self._admit()
        active = [i for i, r in enumerate(self.rows) if r is not None and r.active]
        if not active:
            return []
        for i in active:
            self.rows[i].history += self.rows[i].pending
        wide = [i for i in active if len(self.rows[i].pending) > 1]
        if wide:
            self._prefill(wide)
        # Released rows, and feeds prefilled apart (put_rows writes into the last columns), leave padding behind
        # that every step attends over: a worker's engine kept its previous steps' columns, growing each run by
        # a quarter. Packing costs about one step's cache traffic, so it runs once padding is an eighth of the
        # longest row.
        longest = int(self.cache.n_valid.max())
        if self.cache.length > longest + max(16, longest // 8):
            self.cache.compact()
        tokens = torch.full((self.max_rows, 1), self.pad_id, dtype=torch.long)
        valid = torch.zeros(self.max_rows, 1, dtype=torch.bool)
        for i in active:
            tokens[i, 0], valid[i, 0] = self.rows[i].pending[0], True
        out = self._forward(tokens, valid, self.cache)
        self.steps += 1
        self.tokens_fed += int(valid.sum())
        if self.record_routing:
            self._record(out, valid, self.cache, [(i, i) for i in active])
        logits = self.model.head(out.hidden[:, -1])  # [R, V] fp32: every active row's newest token

        for i in active:
            banned = self.rows[i].request.banned
            if banned is not None:
                logits[i, banned(self.rows[i].tokens)] = float("-inf")
        finished = []
        for rows in self._by_sampling(active):
            request = self.rows[rows[0]].request
            ids, logp = sample_next(logits[rows], request.sampling, request.generator or self.generator)
            for j, i in enumerate(rows):
                result = self._advance(i, int(ids[j]), float(logp[j]), logits[i])
                if result is not None:
                    finished.append(result)
        return finished

    def _prefill(self, rows: list[int]) -> None:
        # Feed all but the last pending token of these rows in forwards over only them, so the step itself is
        # one column wide for every row. Fresh rows with the same feed (a group's samples of one prompt) end in
        # the same state: one of them is computed and copied to the others. Fresh feeds that open alike (an
        # env's tool schemas and system prompt) share one forward over that opening, then go on from copies of it.
        empty = set((self.cache.n_valid == 0).nonzero().flatten().tolist())  # rows with nothing in their cache
        groups: dict[tuple, list[int]] = {}
        for i in rows:
            feed = tuple(self.rows[i].pending[:-1])
            groups.setdefault(feed if i in empty else (i, feed), []).append(i)
        members = list(groups.values())
        feeds = [self.rows[group[0]].pending[:-1] for group in members]
        fresh = [j for j, group in enumerate(members) if group[0] in empty]
        shared = [(n, [fresh[k] for k in ks]) for n, ks in shared_openings([feeds[j] for j in fresh], MIN_SHARED)]
        clustered = {j for _, js in shared for j in js}
        alone = [j for j in range(len(members)) if j not in clustered]
        if alone:
            part = self.cache.take_rows([members[j][0] for j in alone])
            self._feed(part, [feeds[j] for j in alone], [members[j] for j in alone])
        if shared:
            openings = self.cache.take_rows([members[js[0]][0] for _, js in shared])  # fresh rows: empty
            self._feed(openings, [feeds[js[0]][:n] for n, js in shared],
                       [[i for j in js for i in members[j]] for _, js in shared], keep=False)
            order = [(n, j) for n, js in shared for j in js]
            part = openings.take_rows([c for c, (_, js) in enumerate(shared) for _ in js])
            self._feed(part, [feeds[j][n:] for n, j in order], [members[j] for _, j in order])
        self.tokens_fed += sum(len(self.rows[i].pending) - 1 for i in rows)
        for i in rows:
            self.rows[i].pending = self.rows[i].pending[-1:]

    def _feed(self, part, feeds: list[list[int]], targets: list[list[int]], keep: bool = True) -> None:
        # One forward of right-aligned feeds over `part` (rows taken out of the cache); what row j computed is
        # recorded for, and with keep written back into, the engine rows targets[j].
        width = max(len(feed) for feed in feeds)
        pairs = [(j, i) for j, rows in enumerate(targets) for i in rows]
        if width:
            tokens = torch.full((len(feeds), width), self.pad_id, dtype=torch.long)
            valid = torch.zeros(len(feeds), width, dtype=torch.bool)
            for j, feed in enumerate(feeds):
                if feed:
                    tokens[j, width - len(feed):] = torch.tensor(feed)
                    valid[j, width - len(feed):] = True
            out = self._forward(tokens, valid, part)
            if self.record_routing:
                self._record(out, valid, part, pairs)
        if keep:
            self.cache.put_rows([i for _, i in pairs], part, [j for j, _ in pairs])

    def _forward(self, tokens: torch.Tensor, valid: torch.Tensor, cache):
        device = self.model.embed.weight.device
        # Only the last column is sampled from; a prefill's [R, T, V] logits would be a large share of its cost.
        return self.model(tokens.to(device), valid=valid.to(device), cache=cache, return_logits=False)

    def _admit(self) -> None:
        # A turn of a sequence that holds its row goes first: a newcomer admitted before it could evict that
        # very row (parked while its tool ran) and make its next turn re-prefill the whole history.
        held = {r.seq_id for r in self.rows if r is not None}
        ordered = [r for r in self.queue if r.seq_id in held] + [r for r in self.queue if r.seq_id not in held]
        self.queue = deque()
        waiting: deque[TurnRequest] = deque()
        for request in ordered:
            row = self._row_of(request.seq_id)
            if row is not None:
                state = self.rows[row]
                state.pending = state.unfed + list(request.feed)
                state.unfed = []
            else:
                row = self._free_row()
                if row is None:
                    waiting.append(request)
                    continue
                self.cache.reset_rows([row])
                state = self.evicted.pop(request.seq_id, None)
                if state is None:
                    state = _Row(seq_id=request.seq_id, request=request, pending=list(request.feed))
                else:
                    # Rebuild the evicted cache from the kept history; only the new tokens get recorded.
                    state.pending = state.history + state.unfed + list(request.feed)
                    state.skip_record, state.history, state.unfed = len(state.history), [], []
                self.rows[row] = state
            if not state.pending:
                raise ValueError(f"sequence {request.seq_id!r}: a turn needs at least one token to feed")
            state.request, state.active, state.parked_at, state.pinned = request, True, None, False
            for token in request.feed:
                # A prompt may open (or close) the thinking block itself, e.g. a template that ends in <think>.
                if token in (self.think_start_id, self.think_end_id):
                    state.inside_think = token == self.think_start_id
            state.tokens, state.logprobs, state.forced, state.versions = [], [], [], []
            state.routing, state.topk, state.turn_think = [], [], 0
        self.queue = waiting + self.queue

    def _advance(self, i: int, token: int, logp: float, logits: torch.Tensor) -> TurnResult | None:
        row = self.rows[i]
        sampling = row.request.sampling
        budget = row.request.think_budget
        forced = row.inside_think and budget is not None and row.turn_think >= budget
        if forced:
            token = self.think_end_id
            temperature = sampling.temperature or 1.0
            logp = float(torch.log_softmax(logits / temperature, dim=-1)[token])
        row.tokens.append(token)
        row.logprobs.append(logp)
        row.forced.append(forced)
        row.versions.append(self.version)
        if self.on_token is not None:
            self.on_token(row.seq_id, token, logp)
        if token == self.think_start_id:
            row.inside_think = True
        elif token == self.think_end_id:
            row.inside_think = False
        elif row.inside_think:
            row.turn_think += 1

        reason = None
        if token in sampling.stop_ids:
            reason = "stop"
        elif len(row.tokens) >= row.request.max_new_tokens:
            reason = "length"
        elif int(self.cache.n_valid[i]) + 1 >= self.model.cfg.max_seq_len:
            reason = "context"
        if reason is None:
            row.pending = [token]
            return None
        row.active, row.pending, row.unfed, row.parked_at = False, [], [token], self.steps
        return TurnResult(
            seq_id=row.seq_id, tokens=row.tokens, logprobs=row.logprobs, forced=row.forced, versions=row.versions,
            think_tokens=row.turn_think, finish_reason=reason,
            routing=torch.cat(row.routing) if row.routing else None,
            sparse_topk=torch.cat(row.topk) if row.topk else None,
        )

    def _record(self, out, valid: torch.Tensor, cache, pairs: list[tuple[int, int]]) -> None:
        # pairs: (row of this forward's batch, engine row it was computed for); slots map to token indices in the
        # forward's own cache, which is what makes them mean the same in any row. Every fed position is gathered in
        # one op and split per batch row: a dozen small ops per row cost ~70 us a row a decode step on CPU (a quarter
        # of a 32-row step) and, on CUDA, a sync per row.
        counts = valid.sum(dim=1).tolist()  # fed positions per batch row
        routing = topk = None
        if out.routing is not None:
            routing = out.routing[valid].cpu().split(counts)  # [fed, L, k] per batch row
        if out.sparse_topk is not None:
            slots = out.sparse_topk  # [B, W, S, k_s] slot indices, -1 = none
            mapped = cache.row_token_index().gather(1, slots.clamp_min(0).flatten(1)).view_as(slots)
            topk = torch.where(slots >= 0, mapped, slots)[valid].cpu().split(counts)  # [fed, S, k_s] per batch row
        for j, i in pairs:
            skip = min(self.rows[i].skip_record, counts[j])  # a rebuilt history may span two forwards
            self.rows[i].skip_record -= skip
            if routing is not None:
                self.rows[i].routing.append(routing[j][skip:])
            if topk is not None:
                self.rows[i].topk.append(topk[j][skip:])

    def _by_sampling(self, rows: list[int]) -> list[list[int]]:
        # Rows drawing with the same temperature / top-p / top-k from the same random stream are sampled in one call.
        groups: dict[tuple, list[int]] = {}
        for i in rows:
            request = self.rows[i].request
            s = request.sampling
            groups.setdefault((s.temperature, s.top_p, s.top_k, id(request.generator)), []).append(i)
        return list(groups.values())

    def _free_row(self) -> int | None:
        free = next((i for i, r in enumerate(self.rows) if r is None), None)
        if free is not None:
            return free
        parked = [i for i, r in enumerate(self.rows) if not (r.active or r.pinned)]
        if not parked:
            return None
        victim = min(parked, key=lambda i: self.rows[i].parked_at)
        self.evicted[self.rows[victim].seq_id] = self.rows[victim]
        self.rows[victim] = None
        return victim

    def _row_of(self, seq_id: Hashable) -> int | None:
        return next((i for i, r in enumerate(self.rows) if r is not None and r.seq_id == seq_id), None)
