"""How t3's sync-free executors launch (tiers/t3_triton_fused/sparse_fusion.py): the programs an SM
holds and a claimed launch of persistent programs, the ticket counter, the slots that start out
holding the sentinel, the gather of the slots back into row order, and Hopper's programmatic
dependent launches."""

import functools
import inspect

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from tiers import buffers
from tiers.kernels.sparse_rows import CHUNK, SENTINEL, SENTINEL_BITS
from tiers.validation import interpreting


STRIDING = ("syncfree", "dataflow")
"""Executors whose persistent programs may stride over the blocks (CLAIMS); the others take tickets."""


@triton.jit
def _next_ticket(TICKET, N_BLK, LOOP: tl.constexpr):
    """The ticket after a finished block: a fresh one when programs are persistent (LOOP), else
    N_BLK, which ends the program's loop after its one block."""
    if LOOP:
        return tl.atomic_add(TICKET, 1, sem="relaxed")
    else:
        return N_BLK


def _programs(count, per_sm, device):
    """Programs to launch for `count` blocks: one per block, or with per_sm > 0 that many per SM
    (persistent programs that take tickets until none is left; per_sm in all on a CPU device,
    where the interpreter runs programs one after another and the first takes every ticket)."""
    if per_sm == 0:
        return count
    return min(count, per_sm * _sm_count(device))


@functools.lru_cache(maxsize=8)
def _props(device):
    """A CUDA device's properties, asked once, not at every launch (SMs, registers, compute
    capability: _sm_count, resident_per_sm, uses_pdl)."""
    return torch.cuda.get_device_properties(device)


def _sm_count(device):
    """Streaming multiprocessors of a CUDA device (1 for the CPU)."""
    return _props(device).multi_processor_count if device.type == "cuda" else 1


MAX_PROGRAMS_PER_SM = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24}
"""Resident thread blocks an SM holds at most, by compute capability where it is not 32 (CUDA
programming guide, compute capabilities table; 32 on sm_80 and sm_90)."""


def resident_per_sm(n_regs: int, shared: int, num_warps: int, props) -> int:
    """How many programs of a compiled kernel one SM holds at once (what a cooperative launch may
    ask for): the registers, the threads, the shared memory (1 KB reserved a program) and the
    blocks an SM takes (MAX_PROGRAMS_PER_SM) each bound it. Registers go 256 at a time to a
    warp, from one of the SM's four quarters, so a warp's registers must fit in a quarter's
    remainder: at 80 a thread an SM holds 4 · ⌊16 384 / 2 560⌋ = 24 one-warp programs, not
    65 536 / 2 560 = 25 (on the H100 a cooperative launch of 25 a SM was refused as too large,
    2026-11-27). `props`: the device's properties."""
    per_warp = -(-n_regs * 32 // 256) * 256
    quarter = getattr(props, "regs_per_multiprocessor", 65536) // 4
    by_regs = 4 * (quarter // max(per_warp, 1)) // num_warps
    by_threads = props.max_threads_per_multi_processor // (32 * num_warps)
    by_shared = props.shared_memory_per_multiprocessor // (shared + 1024)
    return min(MAX_PROGRAMS_PER_SM.get((props.major, props.minor), 32), by_regs, by_threads, by_shared)


class Bound:
    """One kernel's launch as a prepared call makes it again and again: the grid and keyword
    arguments (constexprs, launch options) fixed, the positional ones given at each launch. The
    first launch goes through the JIT (kernel[grid](…), which binds and specialises every
    argument and looks the compiled kernel up) and keeps the compiled kernel, whose runner takes
    the later ones: it only packs the arguments (the constexprs among them, bound once in
    order). A launch whose positional arguments would specialise otherwise (a dtype, a pointer's
    16-byte alignment, an int's being 1 or a multiple of 16: what Triton keys a kernel on) goes
    through the JIT again, as does every launch in the interpreter. `varying`: the positions of
    the arguments that may change from call to call (the others are the first call's objects at
    every call: a prepared call's tables), so that only theirs are keyed at each launch; a call
    whose other arguments are not those objects goes through the JIT. None: every position."""

    def __init__(self, kernel, grid, kwargs, varying=None):
        self.kernel, self.grid, self.kwargs, self.varying = kernel, grid, kwargs, varying
        self.runner = self.spec = self.rest = None
        self.fixed = ()

    def _key(self, args) -> list:
        return specialisation(args if self.varying is None else [args[i] for i in self.varying])

    def __call__(self, *args):
        if (self.runner is not None and all(args[i] is a or type(a) is int and args[i] == a for i, a in self.fixed)
                and self._key(args) == self.spec):
            self.runner(*args, *self.rest)
            return
        compiled = self.kernel[self.grid](*args, **self.kwargs)
        if self.runner is None and not interpreting():
            names = self.kernel.arg_names
            params = inspect.signature(self.kernel.fn).bind(*args, **{k: v for k, v in self.kwargs.items()
                                                                       if k in names})
            params.apply_defaults()
            self.rest = list(params.arguments.values())[len(args):]     # the constexprs, in order
            self.spec = self._key(args)
            if self.varying is not None:
                apart = {i % len(args) for i in self.varying}
                self.fixed = tuple((i, a) for i, a in enumerate(args) if i not in apart)
            self.runner = compiled[tuple(self.grid) + (1,) * (3 - len(self.grid))]


def jit_launch(kernel, grid, kwargs, varying=None):
    """kernel[grid](*args, **kwargs) for the args it is called with: a launch as Bound makes it,
    through the JIT every time (`varying` as Bound's, unused)."""
    return lambda *args: kernel[grid](*args, **kwargs)


def specialisation(args) -> list:
    """What Triton's kernel key takes from positional arguments (Bound): a tensor's dtype and
    whether its address is a multiple of 16; whether an int is 1, a multiple of 16, and within
    int32 (its type: i32 or wider); anything else as it is (a key that changes more often than
    Triton's only sends more launches through the JIT)."""
    return [(a.dtype, not a.data_ptr() & 15) if isinstance(a, torch.Tensor)
            else (a == 1, not a & 15, -2**31 <= a < 2**31) if type(a) is int else a for a in args]


def claimed(kernel, run, count, args, meta, pdl=False) -> tuple:
    """The grid and keyword arguments that launch `kernel` over `count` blocks as `run` says
    (_launch_claimed): `meta` with what of `run` the kernel takes (by its parameters' names; the
    lean rows' kernel, which always strides and never naps, takes none): LOOP (persistent
    programs), NAP (the sleep between polls; none in the interpreter, which cannot sleep) and,
    for the executors that may stride (STRIDING), STRIDE. Every sync-free executor launches
    through here. One program per block, or
    run.programs_per_sm persistent programs per SM that take tickets or, with claim "stride",
    stride over the blocks. Striding programs must all run at once: the launch is cooperative (it
    fails rather than leave one out), and asks for no more programs per SM than the compiled
    kernel lets an SM hold (resident_per_sm, found once per Prepared). The interpreter runs
    programs one after another, so there a single striding program takes every block. pdl: a
    programmatic dependent launch (the kernel waits for the one before it with gdc_wait). `args`
    are the launch's positional arguments (a striding kernel is compiled with them, once per
    Prepared, to find how many programs an SM holds)."""
    stride = run.claim == "stride"
    extra = dict(LOOP=run.programs_per_sm > 0, NAP=0 if interpreting() else run.nap_ns)
    if run.executor in STRIDING:
        extra["STRIDE"] = stride
    meta = dict(meta, **{k: v for k, v in extra.items() if k in kernel.arg_names})
    if stride and interpreting():      # one program a stream: the interpreter runs them in turn
        return (2 if meta.get("STREAMS") else 1,), meta
    options = {"launch_cooperative_grid": True} if stride else {}
    if pdl:
        options["launch_pdl"] = True
    per_sm = run.programs_per_sm
    if stride:
        if run.resident is None:
            compiled = kernel.warmup(*args, grid=(1,), **meta, **options)
            compiled._init_handles()     # the register count is known once the binary is loaded
            run.resident = resident_per_sm(compiled.n_regs, compiled.metadata.shared, run.num_warps,
                                           _props(args[0].device))
        per_sm = min(per_sm, run.resident)
    programs = _programs(count, per_sm, args[0].device)
    if meta.get("STREAMS"):         # a program for each stream at least, or one would never run
        programs = max(programs, 2)
    return (programs,), dict(meta, **options)


def _launch_claimed(kernel, run, count, args, meta, pdl=False):
    """Launch `kernel` with `args` over `count` blocks as `run` says (claimed)."""
    grid, kwargs = claimed(kernel, run, count, args, meta, pdl)
    kernel[grid](*args, **kwargs)


def _await_from(vec, n, claim="counter"):
    """Put the sentinel in VEC's outputs (every entry past the n inputs) and return a fresh ticket
    counter (_fresh_ticket): what every dataflow launch starts from."""
    bits = SENTINEL_BITS[vec.dtype]
    vec.view(bits)[n:] = SENTINEL[vec.dtype]
    return _fresh_ticket(vec.device, claim)


def _fresh_ticket(device, claim):
    """A ticket counter at 0; striding programs (claim "stride") take no tickets, so theirs is
    left unset, which costs no fill kernel per call."""
    return (torch.empty if claim == "stride" else torch.zeros)(1, dtype=torch.int32, device=device)


@triton.jit
def _input_then_sentinel(OUT, IN, N_IN, FIRST, TOTAL, AWAITED, SENT: tl.constexpr, R: tl.constexpr,
                         SOME: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr, INDIRECT: tl.constexpr):
    """OUT[i] = IN[i] below N_IN and the sentinel past it, for FIRST ≤ i < TOTAL (both as bit
    patterns); with SOME only in the output slots of the blocks of R whose AWAITED flag is set
    (slot N_IN + t·R + j is block t's: R is the plan's slot stride, slot_stride). PDL: the
    dataflow kernel after it may be launched at once (it waits for this one's stores). INDIRECT: IN holds the input's address, not the input."""
    if PDL:
        gdc_launch_dependents()
    if INDIRECT:
        IN = tl.load(IN).to(tl.pointer_type(OUT.dtype.element_ty))
    i = FIRST + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = i < TOTAL
    if SOME:
        out = i >= N_IN
        keep &= ~out | (tl.load(AWAITED + (i - N_IN) // R, mask=keep & out, other=0) != 0)
    tl.store(OUT + i, tl.load(IN + i, mask=i < N_IN, other=SENT), mask=keep)


def _slots_from(vector, total, pdl=False, copy=True, awaited=None, R=1, address=None, into=None):
    """The dataflow executor's VEC for one call: the input (with copy; else its n entries are left
    unwritten, the kernel reading the caller's vector instead: reads_input_apart), then the
    sentinel in every output slot, or with `awaited` (per block of R slots) only in those of the
    blocks some row reads — written by one kernel (a copy and a fill were two, 8.7 and 5.0 µs on
    the 3D grid: figures/data/prof_early_*). With `address` (an int64 tensor the GPU can read,
    t3's graphs: pinned host memory) the kernel reads the input at the address it holds when it
    runs, and `vector` gives only its length, dtype and device. With `into` (slots kept from call
    to call: t3's PREP_AHEAD graphs) the kernel writes there, its first `total` entries only."""
    slots = new_slots(vector, total) if into is None else into
    n = vector.shape[0]
    first = 0 if copy else n
    if total > first:
        grid, kwargs = fill_launch(total - first, vector.dtype, pdl, awaited is not None, R, address is not None)
        _input_then_sentinel[grid](*fill_args(slots, vector, n, first, awaited, address, total), **kwargs)
    return slots


def new_slots(vector, total):
    """An uninitialised VEC of `total` entries like `vector`, for _input_then_sentinel to fill
    (NaN where a check poisons: a slot read but never reset then fails it)."""
    return buffers.empty((total,), dtype=vector.dtype, device=vector.device)


def fill_args(slots, vector, n, first, awaited, address=None, total=None) -> tuple:
    """_input_then_sentinel's positional arguments: the slots and the n-entry input as bit
    patterns (with `address`, the tensor holding the input's address instead: INDIRECT), from
    where to write, up to where (`total`, else the slots' length), and the blocks' AWAITED flags
    (without SOME the kernel reads none: the slots stand in)."""
    bits = SENTINEL_BITS[slots.dtype]
    return (slots.view(bits), vector.contiguous().view(bits) if address is None else address, n, first,
            slots.shape[0] if total is None else total, slots if awaited is None else awaited)


def fill_launch(count, dtype, pdl, some, R, indirect) -> tuple:
    """_input_then_sentinel's grid and keyword arguments for `count` slots (_slots_from)."""
    BLOCK = 2048
    return (triton.cdiv(count, BLOCK),), dict(SENT=SENTINEL[dtype], R=R, SOME=some, BLOCK=BLOCK, PDL=pdl,
                                              INDIRECT=indirect, num_warps=4)


@triton.jit
def _gather_back(OUT, SLOTS, BACK, N, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """OUT[i] = SLOTS[BACK[i]]: the results from the slot layout into row order. A kernel of its own
    rather than torch.index_select so that it can be a dependent launch that waits inside (PDL:
    launched while the dataflow kernel ends, its indices read before gdc_wait); 14.5 µs against
    index_select's 16.0 on the 3D grid (figures/data/pdl_ab_*)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    at = tl.load(BACK + i, mask=i < N, other=0)
    if PDL:
        gdc_wait()
    tl.store(OUT + i, tl.load(SLOTS + at, mask=i < N), mask=i < N)


def back_launch(count, pdl) -> tuple:
    """_gather_back's grid and keyword arguments for `count` results (out = slots[back]), a
    dependent launch with pdl."""
    BLOCK = 1024
    return (triton.cdiv(count, BLOCK),), dict(BLOCK=BLOCK, PDL=pdl, num_warps=4,
                                              **({"launch_pdl": True} if pdl else {}))


@triton.jit
def _copy_at(DST, SRC, AT, N, BLOCK: tl.constexpr):
    """DST[AT[i]] = SRC[AT[i]]: entries copied in place at the positions AT names (copy_at)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    at = tl.load(AT + i, mask=i < N, other=0)
    tl.store(DST + at, tl.load(SRC + at, mask=i < N), mask=i < N)


def copy_at(dst, src, at):
    """dst[at] = src[at] for the positions `at` (a 1-D integer tensor), in one launch where torch's
    index_select and index_copy_ take two and a buffer between them (t3's OWN_COPY_AT)."""
    n = at.shape[0]
    if n:
        BLOCK = 1024
        _copy_at[(triton.cdiv(n, BLOCK),)](dst, src, at, n, BLOCK=BLOCK, num_warps=4)


def _launch_dataflow(kernel, run, val, vec, *blocks, lanes=None, chunk=CHUNK):
    """Fill the outputs with the sentinel and launch the programs (_programs) for the blocks of
    `run.plan`, each of `lanes` lanes (default: run.block_rows)."""
    count, _ = run.plan
    if count == 0:
        return
    n = run.tables.n1
    ticket = _await_from(vec, n)
    tables = (run.dev[k] for k in ("ent_ptr", "ent_val", "ent_aux", "rhs", "diag", "sign", "dst"))
    _launch_claimed(kernel, run, count, (ticket, count, *blocks, *tables, val, vec, n),
                    dict(R=lanes or run.block_rows, CHUNK=chunk, SENT=SENTINEL[vec.dtype],
                         WIDE=run.tables.wide(chunk), num_warps=run.num_warps))


PDL = True
"""Whether the dataflow executor launches its kernel and the gather back as programmatic
dependent launches where the GPU has them (uses_pdl)."""


def uses_pdl(device) -> bool:
    """PDL on a CUDA device of compute capability 9.0 or later (Hopper; the interpreter has no
    launches to overlap)."""
    if not (PDL and device.type == "cuda" and not interpreting()):
        return False
    props = _props(device)
    return (props.major, props.minor) >= (9, 0)
