// The reference backend's op implementations: plain loops for every op of op_list.inc, forward and gradient,
// in f32 and f64 (integer dtypes where an op takes ids, labels or moves bytes). Obviously correct rather than
// fast, and deterministic: every loop runs in a fixed order on one thread, and every sum, reduction and dot
// product accumulates in double (Note [Reference accumulation] in kernel_util.h), so the same inputs always
// give bit-identical outputs. f16 and bf16 arithmetic is refused with an error rather than approximated.
#pragma once

#include "lms/runtime/kernel.h"
#include "lms/support/error.h"

namespace lms {

// Runs one op on the buffers of `call` (see KernelCall for the in-place contract). Before touching memory it
// checks the call's arity and that the output types are what the op's shape rule gives for the input types and
// attributes, so a malformed call is an error, never an out-of-bounds access. Source ops other than `constant`
// are fed by the runtime and are an error here.
Result<void> run_reference_kernel(const KernelCall& call);

// The checks run_reference_kernel makes before touching memory (arity, buffers present, output types equal to
// the shape rule's), for other backends' kernels that index buffers by the same types.
Result<void> check_kernel_call(const KernelCall& call);

}  // namespace lms
