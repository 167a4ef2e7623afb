// Where the views of a known graph end, on a device the host sleeps through (ggml-vulkan,
// backend_wait.h): chosen once for the whole graph from each node's measured time, instead of node
// by node as the asks come.
//
// Asked node by node, a view can only end where the quota finds it: where single nodes outlast
// the quota (llvmpipe, a slow GPU) views of ten nodes hold a heavy product in the busy-waited tail
// at nearly every place, and a core spins through it (on llvmpipe, the core the compute needs).
// Seen whole, a graph can be cut where each view's tail is cheap: a view of 10 to 14 nodes whose
// last node carries the almost-ready fence (a product, say) has no busy tail at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llama_cancel {

// For the `n` nodes of a graph on the device, in order, taking ms[i] ms each, fence[i] each one's
// fence_role (backend_wait.h), starts[i] != 0 where the device's split
// begins again after one elsewhere (the host's: the device's view before it ended there by
// itself; NULL: no such node): whether a view ends at node i (a checkpoint there; also at the last
// node of each split and of the graph, which end there anyway). Of the ways to cut the graph into
// views of at most `max_view_ms` (a single node may take longer: it is a view of its own) and at
// most `max_nodes` nodes, none across a split's start, the one whose busy-waited tails plus
// `view_cost_ms` a view cost the least time.
std::vector<uint8_t> plan_views(const float * ms, const uint8_t * fence, const uint8_t * starts, size_t n,
                                double max_view_ms, double view_cost_ms, size_t max_nodes);

// What a plan costs: the time of its views' busy-waited tails, ms (the nodes past each view's
// first_spun_node), its views ending at `cuts` and before each of `starts` (NULL: none).
double spun_ms(const float * ms, const uint8_t * fence, const uint8_t * starts, const uint8_t * cuts, size_t n);

} // namespace llama_cancel
