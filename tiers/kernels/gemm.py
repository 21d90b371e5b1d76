"""Batched tiled GEMM:  C[b] = A[b] · B[b],  A [Bt, M, K], B [Bt, K, N], any strides.

Each program owns one BLOCK_M × BLOCK_N tile of C. It walks K in BLOCK_K steps, loading an
A tile and a B tile and accumulating their product in float32 registers; C is written once.
Passing a transposed view (e.g. kᵀ via strides) costs nothing: the kernel only sees strides.
Programs are grouped GROUP_M tiles tall so that neighbours reuse the same B columns in L2.
"""
import triton
import triton.language as tl

from tiers.buffers import empty
from tiers.validation import check_same_device, check_same_dtype, check_triton_device, TRITON_DTYPES


def block_d(D: int) -> int:
    """The head dim padded to a power of two, at least 16 (tl.dot's smallest operand): the
    attention kernels' BLOCK_D. Not triton.next_power_of_2, which Triton 3.9 makes a constexpr
    function that costs microseconds a call from Python: short calls are bound by their host time."""
    return max(16, 1 << (D - 1).bit_length())


@triton.jit
def dot(a, b, acc, IEEE: tl.constexpr):
    """acc + a·b; float32 inputs take exact float32 products (IEEE), half precision the tensor cores."""
    if IEEE:
        return tl.dot(a, b, acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _bmm_kernel(A, B, C, M, N, K,
                s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn,
                IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    n_m = tl.cdiv(M, BLOCK_M)
    n_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * n_n)
    first_m = group * GROUP_M
    rows_in_group = min(n_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * n_n)) % rows_in_group
    pid_n = (pid % (GROUP_M * n_n)) // rows_in_group

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + batch * s_ab + offs_m[:, None] * s_am + offs_k[None, :] * s_ak
    b_ptrs = B + batch * s_bb + offs_k[:, None] * s_bk + offs_n[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] + k0 < K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] + k0 < K) & (offs_n[None, :] < N), other=0.0)
        acc = dot(a, b, acc, IEEE)
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    c_ptrs = C + batch * s_cb + offs_m[:, None] * s_cm + offs_n[None, :] * s_cn
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def bmm(a, b, out=None):
    """A [Bt, M, K] @ B [Bt, K, N] → [Bt, M, N] in A's dtype (float32 accumulation).

    float32 inputs use exact float32 products (not TF32), so results match the float32 row
    of the tolerance table.
    """
    import torch

    check_same_dtype((("a", a), ("b", b)), TRITON_DTYPES)
    check_same_device((("a", a), ("b", b)))
    check_triton_device("a", a)
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"bmm needs a [Bt, M, K] and b [Bt, K, N], got {tuple(a.shape)} and {tuple(b.shape)}")
    Bt, M, K = a.shape
    N = b.shape[2]
    if out is None:
        out = empty((Bt, M, N), device=a.device, dtype=a.dtype)
    BM, BN, BK = (128, 128, 32) if a.dtype != torch.float32 else (64, 64, 32)
    if a.device.type == "cpu":  # interpreter: small tiles keep CPU time sane
        BM, BN, BK = 64, 64, 32
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN), Bt)
    _bmm_kernel[grid](a, b, out, M, N, K, *a.stride(), *b.stride(), *out.stride(),
                      IEEE=a.dtype == torch.float32, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                      num_warps=8 if BM * BN >= 128 * 128 else 4, num_stages=3)
    return out
