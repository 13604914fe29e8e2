"""The named check `dsa-forward`: one DeepSeek sparse attention forward on an SM90/SM100 GPU.

Declared by the shipped image on nvidia-cudnn-frontend and FlashMLA (`verify: {check: dsa-forward}`).
torch, ``from cudnn import DSA`` with both wrappers and a sparse MLA (flash_mla, else sglang's
sgl_kernel.flash_mla) are imported, then on a Hopper (SM90) or Blackwell (SM100) GPU one forward runs: lightning indexer -> top-k -> sparse MLA, each stage checked
against a float32 PyTorch reference and timed against it. The verdicts (judge_*) are plain Python over
metrics, so they can be tested without torch; the metrics are computed with torch on the GPU.

Test hook: PINWHEEL_SMOKE_CORRUPT=indexer|topk|mla perturbs that stage's kernel output before its
check, to show the failure path on real hardware.
"""
from __future__ import annotations

import math
import os
import time

from ..dists import dist_version
from ..records import StageFailure, exc_tail, exc_text, stage, timed_import

NAME = "dsa-forward"
# Its entry in NAMED_CHECKS, which the manifest reader reads: a name it accepts is one the payload runs.
ENTRY = {
    "needs": "gpu",
    "about": "one DeepSeek sparse attention forward on an SM90/SM100 GPU: cudnn.DSA lightning indexer, "
             "cudnn.DSA top-k, FlashMLA sparse MLA, each against a float32 PyTorch reference",
}
STAGES = ("indexer", "topk", "mla")  # what PINWHEEL_SMOKE_CORRUPT may name

# ---------------------------------------------------------------------------
# Tolerances. Each one is stated with the reasoning that sets it.
#
# indexer: the kernel and the reference use the same bf16 inputs and both
#   accumulate in fp32 (WGMMA accumulators / cuBLAS sgemm with TF32 off); they
#   differ only in summation order over 128 dims x 64 heads, a few fp32 ulps of
#   the largest term (~1e-7 relative). 1e-4 (max |kernel - ref| over the
#   unmasked scores, divided by max |ref|) leaves a 100x margin yet sits 40x
#   below one bf16 rounding (unit roundoff 2^-8 ~ 3.9e-3), so a bf16 output, a
#   missing head, a wrong weight or a wrong scale all fail. The causal mask (-inf
#   pattern) must match exactly.
INDEXER_REL_TOL = 1e-4
# topk: a selection computes nothing, so the values it picks must equal
#   torch.topk's values on the same input exactly (sorted; ties may pick other
#   indices but never other values). Against the float32 reference scores a
#   selected column may sit below the reference's k-th score by at most
#   2*e, e = max |kernel scores - reference scores| (every reference top-k
#   column scores >= ref_kth - e in the kernel's scores, so kernel_kth >=
#   ref_kth - e, and a selected x has ref(x) >= kernel(x) - e >= ref_kth - 2e).
TOPK_VALUE_TOL = 0.0
# mla: out = sum_j p_j v_j. The kernel rounds the attention weights p to bf16
#   before the P.V product (error <= u * sum_j p_j |v_j|) and rounds the output
#   to bf16 (error <= u * |out|), u = 2^-8 the bf16 unit roundoff; everything
#   else (fp32 logits, exp2, rescaling) is orders of magnitude smaller.
#   Elementwise the error must stay within 4x that first-order bound:
#       |out - ref| <= 2^-6 * (|ref| + sum_j p_j |v_j|)
#   checked on query rows with at least one valid index (a row with none has
#   no defined output).
MLA_BOUND_FACTOR = 2.0 ** -6

# Problem size of the gpu level: one sequence of 4096 queries, indexer with 64
# heads of 128 and a 4:1 compressed KV (1024 keys), top-512 (a multiple of 128,
# as the SM90 FlashMLA kernel needs), MLA with 64 heads, d_qk 576, d_v 512.
GPU_SHAPE = {
    "batch": 1,
    "seq_q": 4096,
    "index_heads": 64,
    "index_dim": 128,
    "ratio": 4,
    "topk": 512,
    "mla_heads": 64,
    "mla_d_qk": 576,
    "mla_d_v": 512,
}

# The gpu level's torch device. Only a development harness changes it (to run
# the stage plumbing with stand-in kernels on a CPU); the payload never does.
_DEVICE = "cuda"


def _import_torch():
    import torch

    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": bool(torch.cuda.is_available()),
    }


def _import_cudnn_dsa():
    import cudnn

    version = getattr(cudnn, "__version__", None) or dist_version("nvidia-cudnn-frontend")
    where = os.path.dirname(getattr(cudnn, "__file__", "") or "") or "?"
    try:
        from cudnn import DSA  # noqa: F401
    except ImportError as exc:
        raise StageFailure(
            f"cudnn.DSA is missing: the cudnn module ({where}, nvidia-cudnn-frontend {version or 'unknown'}) "
            f"does not provide DSA, so the DeepSeek sparse attention kernels cannot run "
            f"(an nvidia-cudnn-frontend that ships cudnn.DSA is needed). {exc_text(exc)}",
            version=version,
            location=where,
        ) from exc
    loaded = []
    for attr in ("indexer_forward_wrapper", "indexer_top_k_wrapper"):
        try:
            getattr(DSA, attr)
        except Exception as exc:  # noqa: BLE001
            raise StageFailure(
                f"cudnn.DSA.{attr} failed to load (nvidia-cudnn-frontend {version}; the DSA kernels need the "
                f"CuTe DSL: nvidia-cutlass-dsl, cuda-bindings, apache-tvm-ffi): {exc_text(exc)}",
                version=version,
                location=where,
            ) from exc
        loaded.append(attr)
    return {
        "version": version,
        "location": where,
        "loaded": loaded,
        "cutlass_dsl": dist_version("nvidia-cutlass-dsl"),
    }


# Where the sparse MLA kernel comes from: FlashMLA's own package, or the copy sglang's kernel package
# ships (sgl_kernel.flash_mla), which images built on an sglang release carry instead. The first one that
# imports is used, and the record names it.
MLA_PROVIDERS = ("flash_mla", "sgl_kernel.flash_mla")


def mla_module():
    """(module name, module) of the first MLA provider that imports; the last ImportError where none does."""
    import importlib

    error = None
    for name in MLA_PROVIDERS:
        try:
            return name, importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name not in (name, name.split(".")[0]):
                raise  # the provider is there but something it needs is not: that is its failure
            error = exc
    raise error


def mla_sparse_fwd(provider: str, module, q, kv, indices, sm_scale: float, d_v: int):
    """One sparse MLA prefill. FlashMLA's own package keeps the SM90 kernels behind use_legacy=True (its
    non-legacy kernels are SM100 only); sglang's copy picks the kernel for the device itself."""
    if provider == "flash_mla":
        return module.flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=d_v, use_legacy=True)
    return module.flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=d_v)


def _import_flash_mla():
    provider, flash_mla = mla_module()
    if not hasattr(flash_mla, "flash_mla_sparse_fwd"):
        raise StageFailure(f"{provider} has no flash_mla_sparse_fwd")
    legacy = None
    if provider == "flash_mla":
        try:
            from flash_mla import _loader

            legacy = bool(_loader.has_legacy())
        except Exception:  # noqa: BLE001 - older builds have no loader
            pass
    if provider == "flash_mla":
        version = getattr(flash_mla, "__version__", None) or dist_version("sgl-flash-mla", "flash-mla")
    else:  # sglang's copy carries no version of its own: its package's
        version = dist_version("sglang-kernel", "sgl-kernel")
    return {"provider": provider, "version": version, "legacy_kernels": legacy}


def run(args, corrupt, doc) -> tuple:
    """The named check `dsa-forward`: (stages, why it was skipped or None). Its imports first (a missing
    or broken module is a failure, named), then the device (no CUDA device, or one that is neither SM90
    nor SM100, is a skip), then the forward."""
    stages = [
        timed_import("gpu", "torch", _import_torch),
        timed_import("gpu", "cudnn.DSA", _import_cudnn_dsa),
        timed_import("gpu", "flash_mla", _import_flash_mla),
    ]
    if any(st["status"] == "failed" for st in stages):
        return stages + [stage("gpu", "dsa-forward", "skipped", reason="not run: an import failed")], None
    import torch

    reason = None
    if not torch.cuda.is_available():
        reason = "torch sees no CUDA device"
    else:
        doc["device"] = device_info(torch)  # named in the record even where the forward does not run
        cap = torch.cuda.get_device_capability()
        if cap[0] not in (9, 10):
            reason = f"the DSA kernels are built for SM90 and SM100; this GPU is sm_{cap[0]}{cap[1]}"
    if reason:
        return stages + [stage("gpu", "dsa-forward", "skipped", reason=reason)], reason
    forward = run_forward(args, corrupt)
    return stages + forward, None


def judge_indexer(m: dict) -> tuple:
    """(ok, message) for indexer metrics {max_rel_err, mask_mismatch, nonfinite_valid}."""
    rel = m.get("max_rel_err")
    bad = []
    if m.get("mask_mismatch", 0):
        bad.append(f"{m['mask_mismatch']} scores disagree with the causal mask (-inf pattern)")
    if rel is None or not math.isfinite(rel) or rel > INDEXER_REL_TOL:
        bad.append(f"max relative error {rel:.3g} > tolerance {INDEXER_REL_TOL:g}" if rel is not None
                   else "no relative error computed")
    if bad:
        return False, "indexer: " + "; ".join(bad)
    return True, f"indexer: max relative error {rel:.3g} <= {INDEXER_REL_TOL:g}, mask exact"


def judge_topk(m: dict) -> tuple:
    """(ok, message) for top-k metrics."""
    bad = []
    for key, what in (
        ("count_mismatch_rows", "rows with a wrong number of valid indices"),
        ("out_of_range", "indices outside the row's valid length"),
        ("duplicate_rows", "rows with a repeated index"),
        ("value_mismatch_rows", "rows whose selected scores differ from torch.topk"),
        ("returned_value_mismatch", "returned values that differ from the scores at their indices"),
        ("reference_violation_rows", "rows selecting a column below the reference k-th score - 2e"),
    ):
        if m.get(key, 0):
            bad.append(f"{m[key]} {what}")
    if bad:
        return False, "topk: " + "; ".join(bad)
    return True, (
        f"topk: selections equal torch.topk on {m.get('rows', '?')} rows "
        f"(overlap with reference top-k {m.get('reference_overlap', float('nan')):.4f})"
    )


def judge_mla(m: dict) -> tuple:
    """(ok, message) for MLA metrics {max_abs_err, max_err_over_bound, rows_checked, nonfinite}."""
    ratio = m.get("max_err_over_bound")
    bad = []
    if not m.get("rows_checked"):
        bad.append("no query row had a valid index")
    if m.get("nonfinite", 0):
        bad.append(f"{m['nonfinite']} non-finite outputs in checked rows")
    if ratio is None or not math.isfinite(ratio) or ratio > 1.0:
        bad.append(
            f"error exceeds the bound 2^-6*(|ref|+sum p|v|) by {ratio:.3g}x (max abs error {m.get('max_abs_err', float('nan')):.3g})"
            if ratio is not None else "no error computed"
        )
    if bad:
        return False, "mla: " + "; ".join(bad)
    return True, (
        f"mla: max abs error {m['max_abs_err']:.3g}, at most {ratio:.3f} of the elementwise bound"
    )


def _time_cuda(torch, fn, warmup: int, reps: int) -> dict:
    import statistics  # here, not at the top: the manifest reader imports this module for NAMED_CHECKS

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return {"median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4), "reps": reps, "warmup": warmup}


def _first_call(torch, fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, round(time.perf_counter() - t0, 3)


def indexer_reference(torch, q, k, w, ratio: int, sm_scale: float):
    """float32 scores (B, S_q, S_k): sm_scale * sum_h relu(q_h . k) * w_h, -inf
    where key t >= (s + 1) // ratio (the kernel's ratio causal mask)."""
    qf = q.float()
    kf = k.float()[:, :, 0, :]
    logits = torch.einsum("bshd,btd->bsht", qf, kf)
    scores = (logits.relu_() * w.float().unsqueeze(-1)).sum(dim=2) * sm_scale
    return scores.masked_fill(~causal_mask(torch, q.shape[1], k.shape[1], ratio, q.device), float("-inf"))


def causal_mask(torch, s_q: int, s_k: int, ratio: int, device):
    limit = (torch.arange(s_q, device=device) + 1) // ratio
    return torch.arange(s_k, device=device)[None, :] < limit[:, None]


def mla_reference(torch, q, kv, indices, sm_scale: float, d_v: int, with_bound: bool = False):
    """float32 sparse MLA: out[s, h] = softmax_j(q[s,h].kv[idx[s,j]] * sm_scale) . v[idx[s,j]];
    indices < 0 or >= s_kv are invalid. Optionally also sum_j p_j |v_j| for the bound."""
    s_kv = kv.shape[0]
    idx = indices[:, 0, :].long()
    invalid = (idx < 0) | (idx >= s_kv)
    gathered = kv[:, 0, :].float()[idx.clamp(0, s_kv - 1)]  # (S_q, topk, d_qk)
    logits = torch.bmm(q.float(), gathered.transpose(1, 2)) * sm_scale  # (S_q, H, topk)
    logits.masked_fill_(invalid[:, None, :], float("-inf"))
    p = torch.softmax(logits, dim=-1)
    v = gathered[..., :d_v]
    out = torch.bmm(p, v)
    if with_bound:
        return out, torch.bmm(p, v.abs())
    return out


def device_info(torch) -> dict:
    """The CUDA device the gpu level runs on, as the result document records it."""
    dev = torch.device(_DEVICE)
    cap = torch.cuda.get_device_capability()
    props = torch.cuda.get_device_properties(dev)
    return {
        "name": torch.cuda.get_device_name(dev),
        "capability": f"{cap[0]}.{cap[1]}",
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2 ** 30, 1),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
    }


class _Problem:
    """The forward's inputs: sizes, timing repetitions and the seeded bf16 generator on the device."""

    def __init__(self, torch, args):
        self.torch, self.dev = torch, torch.device(_DEVICE)
        shape = dict(GPU_SHAPE, seq_q=args.seq_q, topk=args.topk)
        self.B, self.S, self.H, self.D = shape["batch"], shape["seq_q"], shape["index_heads"], shape["index_dim"]
        self.ratio, self.topk = shape["ratio"], shape["topk"]
        self.T = self.S // self.ratio
        self.Hm, self.dqk, self.dv = shape["mla_heads"], shape["mla_d_qk"], shape["mla_d_v"]
        self.warm, self.reps = args.warmup, args.reps
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(args.seed)

    def randn(self, *size, scale=1.0):
        torch = self.torch
        return (torch.randn(*size, generator=self.gen, device=self.dev) * scale).to(torch.bfloat16)

    def timed(self, fn) -> dict:
        return _time_cuda(self.torch, fn, self.warm, self.reps)

    def mask(self):
        return causal_mask(self.torch, self.S, self.T, self.ratio, self.dev)


def run_forward(args, corrupt) -> list:
    """The forward's three stages; a stage after one that raised is SKIPPED."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    p = _Problem(torch, args)
    stages = []
    scores, ref_scores = _indexer(p, corrupt, stages)
    idx = None
    if scores is None:
        stages.append(stage("gpu", "topk", "skipped", reason="not run: the indexer stage raised"))
    else:
        idx = _topk(p, corrupt, scores, ref_scores, stages)
    del ref_scores
    if idx is None:
        stages.append(stage("gpu", "mla", "skipped", reason="not run: an earlier stage raised"))
    else:
        _mla(p, corrupt, idx, stages)
    return stages


def _indexer(p: _Problem, corrupt, stages: list) -> tuple:
    """Stage 1, the lightning indexer: (its scores, the reference's), both None if it raised."""
    from cudnn import DSA

    torch, (B, S, H, D, T, ratio) = p.torch, (p.B, p.S, p.H, p.D, p.T, p.ratio)
    sm_scale_idx = D ** -0.5
    q, k, w = p.randn(B, S, H, D), p.randn(B, T, 1, D), p.randn(B, S, H, scale=H ** -0.5)
    cfg1 = {"q": [B, S, H, D], "k": [B, T, 1, D], "w": [B, S, H], "ratio": ratio, "sm_scale": sm_scale_idx}
    try:
        def kern1():
            return DSA.indexer_forward_wrapper(q, k, w, ratio=ratio, sm_scale=sm_scale_idx)["scores"]

        scores, first_s = _first_call(torch, kern1)
        t_kernel = p.timed(kern1)
        ref_scores = indexer_reference(torch, q, k, w, ratio, sm_scale_idx)
        t_ref = p.timed(lambda: indexer_reference(torch, q, k, w, ratio, sm_scale_idx))
        scores = scores[..., :T].contiguous()  # SM100 pads S_k for TMA
        if corrupt == "indexer":
            scores = scores * (1.0 + 1e-3)
        valid = p.mask().expand(B, S, T)
        mask_mismatch = int((torch.isfinite(scores) != valid).sum())
        diff = torch.nan_to_num((scores - ref_scores).abs()[valid], nan=float("inf"))
        max_abs = float(diff.max())
        ref_max = float(ref_scores[valid].abs().max())
        metrics = {
            "max_abs_err": max_abs,
            "ref_max_abs": ref_max,
            "max_rel_err": max_abs / ref_max if ref_max > 0 else float("inf"),
            "mask_mismatch": mask_mismatch,
            "tolerance_rel": INDEXER_REL_TOL,
        }
        ok, msg = judge_indexer(metrics)
        stages.append(stage("gpu", "indexer", "passed" if ok else "failed", message=msg, metrics=metrics,
                            config=cfg1, first_call_s=first_s, kernel=t_kernel, reference=t_ref,
                            corrupted=corrupt == "indexer"))
        return scores, ref_scores
    except Exception as exc:  # noqa: BLE001
        stages.append(stage("gpu", "indexer", "failed", error=exc_text(exc), traceback=exc_tail(), config=cfg1))
        return None, None


def _topk(p: _Problem, corrupt, scores, ref_scores, stages: list):
    """Stage 2, top-k over the kernel's scores: its indices, None if it raised."""
    from cudnn import DSA

    torch, (B, S, T, topk) = p.torch, (p.B, p.S, p.T, p.topk)
    cfg2 = {"rows": B * S, "cols": T, "topk": topk}
    try:
        scores2d = scores.reshape(B * S, T).contiguous()
        lens = p.mask().sum(-1).to(torch.int32).repeat(B).contiguous()

        def kern2():
            return DSA.indexer_top_k_wrapper(scores2d, lens, topk)

        res, first_s = _first_call(torch, kern2)
        t_kernel = p.timed(kern2)
        t_ref = p.timed(lambda: torch.topk(scores2d, topk, dim=1))
        idx, vals = res["indices"], res["values"]
        if corrupt == "topk":
            idx = idx.clone()
            low = scores2d.masked_fill(~torch.isfinite(scores2d), float("inf")).argmin(dim=1).to(idx.dtype)
            idx[:, 0] = torch.where(lens > topk, low, idx[:, 0])
        metrics = _topk_metrics(p, scores2d, ref_scores.reshape(B * S, T), lens, idx, vals)
        ok, msg = judge_topk(metrics)
        stages.append(stage("gpu", "topk", "passed" if ok else "failed", message=msg, metrics=metrics,
                            config=cfg2, first_call_s=first_s, kernel=t_kernel,
                            reference=dict(t_ref, what="torch.topk on the same scores"),
                            corrupted=corrupt == "topk"))
        return idx
    except Exception as exc:  # noqa: BLE001
        stages.append(stage("gpu", "topk", "failed", error=exc_text(exc), traceback=exc_tail(), config=cfg2))
        return None


def _topk_metrics(p: _Problem, scores2d, ref2d, lens, idx, vals) -> dict:
    """What judge_topk reads: the selection against torch.topk on the same scores, and against the float32
    reference's top-k within 2e (see TOPK_VALUE_TOL)."""
    torch, (B, S, topk) = p.torch, (p.B, p.S, p.topk)
    long_rows = lens > topk
    sel = idx >= 0
    idx_l = idx.long().clamp(min=0)
    count_bad = int((sel.sum(-1) != lens.clamp(max=topk)).sum())
    out_of_range = int((sel & (idx.long() >= lens[:, None].long())).sum())
    marked = torch.where(sel, idx_l, -1 - torch.arange(topk, device=p.dev)[None, :])
    srt = torch.sort(marked, dim=1).values
    dup_rows = int((srt[:, 1:] == srt[:, :-1]).any(dim=1).sum())
    got = torch.gather(scores2d, 1, idx_l).masked_fill(~sel, float("-inf"))
    got_sorted = torch.sort(got, dim=1, descending=True).values
    ref_top = torch.topk(scores2d, topk, dim=1).values
    value_bad_rows = int((got_sorted != ref_top).any(dim=1).sum())
    returned_bad = int(((vals != got) & sel).sum()) if vals is not None else 0
    # against the float32 reference scores
    valid2d = p.mask().repeat(B, 1)
    e = float(torch.nan_to_num((scores2d - ref2d).abs()[valid2d], nan=float("inf")).max())
    ref_topk = torch.topk(ref2d, topk, dim=1)
    kth_ref = ref_topk.values[:, -1]
    sel_ref_min = torch.gather(ref2d, 1, idx_l).masked_fill(~sel, float("inf")).min(dim=1).values
    viol = int(((sel_ref_min < kth_ref - 2 * e) & long_rows).sum())
    in_ref = torch.zeros_like(scores2d, dtype=torch.bool).scatter_(1, ref_topk.indices, True)
    overlap_rows = torch.gather(in_ref, 1, idx_l) & sel
    n_long = int(long_rows.sum())
    overlap = float(overlap_rows[long_rows].sum()) / (n_long * topk) if n_long else 1.0
    return {
        "rows": B * S,
        "rows_longer_than_topk": n_long,
        "count_mismatch_rows": count_bad,
        "out_of_range": out_of_range,
        "duplicate_rows": dup_rows,
        "value_mismatch_rows": value_bad_rows,
        "returned_value_mismatch": returned_bad,
        "reference_violation_rows": viol,
        "reference_eps": 2 * e,
        "reference_overlap": overlap,
        "tolerance_value": TOPK_VALUE_TOL,
    }


def _mla(p: _Problem, corrupt, idx, stages: list) -> None:
    """Stage 3, sparse MLA over the selected indices, each batch entry against the float32 reference."""
    provider, flash_mla = mla_module()
    torch, (B, S, T, topk, Hm, dqk, dv) = p.torch, (p.B, p.S, p.T, p.topk, p.Hm, p.dqk, p.dv)
    sm_scale_mla = dqk ** -0.5
    cfg3 = {"q": [S, Hm, dqk], "kv": [T, 1, dqk], "indices": [S, 1, topk], "d_v": dv,
            "sm_scale": sm_scale_mla, "provider": provider, "use_legacy": provider == "flash_mla"}
    try:
        worst = {"max_abs_err": 0.0, "max_err_over_bound": 0.0, "rows_checked": 0, "nonfinite": 0}
        timing = None
        for b in range(B):
            qm, kv = p.randn(S, Hm, dqk), p.randn(T, 1, dqk)
            ind = idx.view(B, S, topk)[b].unsqueeze(1).contiguous()

            def kern3():
                return mla_sparse_fwd(provider, flash_mla, qm, kv, ind, sm_scale_mla, dv)

            res, first_s = _first_call(torch, kern3)
            if b == 0:
                timing = (first_s, p.timed(kern3), p.timed(lambda: mla_reference(torch, qm, kv, ind, sm_scale_mla, dv)))
            out = res[0] + 0.1 if corrupt == "mla" else res[0]
            ref, absbound = mla_reference(torch, qm, kv, ind, sm_scale_mla, dv, with_bound=True)
            _mla_worst(torch, worst, out, ref, absbound, (ind[:, 0, :] >= 0).any(dim=-1))
            del ref, absbound
        worst["rows_total"] = B * S
        worst["bound_factor"] = MLA_BOUND_FACTOR
        ok, msg = judge_mla(worst)
        stages.append(stage("gpu", "mla", "passed" if ok else "failed", message=msg, metrics=worst, config=cfg3,
                            first_call_s=timing[0], kernel=timing[1], reference=timing[2],
                            corrupted=corrupt == "mla"))
    except Exception as exc:  # noqa: BLE001
        stages.append(stage("gpu", "mla", "failed", error=exc_text(exc), traceback=exc_tail(), config=cfg3))


def _mla_worst(torch, worst: dict, out, ref, absbound, rows) -> None:
    """Fold one batch entry's error against the elementwise bound (see MLA_BOUND_FACTOR) into `worst`."""
    err = (out.float() - ref).abs()[rows]
    nonfinite = int((~torch.isfinite(err)).sum())
    err = torch.nan_to_num(err, nan=float("inf"))
    bound = MLA_BOUND_FACTOR * (ref.abs() + absbound)[rows]
    worst["max_abs_err"] = max(worst["max_abs_err"], float(err.max()))
    worst["max_err_over_bound"] = max(worst["max_err_over_bound"], float((err / bound).max()))
    worst["rows_checked"] += int(rows.sum())
    worst["nonfinite"] += nonfinite
    worst["ref_max_abs"] = max(worst.get("ref_max_abs", 0.0), float(ref[rows].abs().max()))
    worst["bound_min"] = min(worst.get("bound_min", float("inf")), float(bound.min()))
    worst["bound_max"] = max(worst.get("bound_max", 0.0), float(bound.max()))


def add_arguments(parser) -> None:
    """Its command-line options: the problem size and the timing."""
    parser.add_argument("--seq-q", dest="seq_q", type=int, default=GPU_SHAPE["seq_q"], help="gpu level: query tokens")
    parser.add_argument("--topk", type=int, default=GPU_SHAPE["topk"], help="gpu level: top-k (a multiple of 128)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)


def argument_error(args) -> str | None:
    """What is wrong with its options, or None."""
    if args.topk % 128 or args.topk <= 0:
        return "--topk must be a positive multiple of 128"
    if args.seq_q % (GPU_SHAPE["ratio"] * 128) or args.seq_q <= 0:
        return f"--seq-q must be a positive multiple of {GPU_SHAPE['ratio'] * 128}"
    return None
