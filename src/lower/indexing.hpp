#pragma once
// Internal to the lower stage: Gather and ScatterAdd as indirect-DMA kernels
// (indexing.cpp). The driver resolves the edges' views into accesses and
// hands them over with the node's dense output buffer.

#include "builder.hpp"

#include <optional>

namespace spool::lower::detail {

// torch.gather: out[..i..] = data[..index[..i..]..] along `axis`; `out` is a
// dense buffer of the index's shape. Each tile loads its index values, then
// reads the data by an indirect DMA (a row gather moves whole rows).
void emit_gather(Emitter& em, const std::string& name, const Access& data, const Access& index, int64_t axis,
                 const Access& out);

// torch.scatter_add: out = data, then out[..index[..i..]..] += src[..i..]
// along `axis`, in index order. `out` is a dense buffer of data's shape.
void emit_scatter_add(Emitter& em, const std::string& name, const Access& data, const Access& index, const Access& src,
                      int64_t axis, const Access& out);

// A gather along axis 0 whose index is one value per batch (broadcast over
// every other axis: MoE expert matrices per routed pair), as an access its
// reader loads through the index (Access::index_buffer), with no kernel of its
// own; nullopt when the gather has another form.
std::optional<Access> fused_gather(const Access& data, const Access& index, const Shape& out_shape, int64_t axis);

// True when a gather is better served by indirect DMA than by loading whole
// rows of the data into the scratchpad: every gather except one along the
// last axis (where a row of data is small and gathered on the vector unit).
bool gather_by_dma(const Shape& out_shape, int64_t axis);

}  // namespace spool::lower::detail
