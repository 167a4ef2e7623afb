// Every tuned number of the checkpoint policy, in one table: its value, its unit, what it means,
// and the test or benchmark row that holds it there. How a number was found: docs/design.md,
// "How some of the numbers were found".
#pragma once

#include <cstddef>
#include <cstdint>

namespace llama_cancel::tuning {

// --- The core (checkpoint_policy.h): work, rates, interval ---------------------------------------
// FLOP. Work between checkpoints never below this: tiny graphs do not synchronize at every node.
// Test: Policy.QuotaStaysWithinItsBounds.
constexpr double k_min_quota = 4.0e6;
// FLOP. The quota of a device not measured yet (why not smaller: docs/design.md, Checkpoints).
// Test: Policy.QuotaAdaptsToASlowDevice.
constexpr double k_initial_quota = 2.0e8;
// ms. A device not measured yet takes the rate its first views showed once they add up to this
// (the guess replaced at once). Test: Policy.ANewGraphIsCutByTheRateItsDeviceShowed.
constexpr double k_first_sample_ms = 0.5;
// FLOP. Work between checkpoints never above this. Test: Policy.QuotaStaysWithinItsBounds.
constexpr double k_max_quota = 1.0e13;
// ms. Asks closer than this belong to one view (they follow each other within microseconds).
// Test: Policy.ShortPausesBetweenSplitsCountInTheInterval.
constexpr double k_ask_gap_ms = 0.25;
// x. A longer pause is compute while at most this many times what the view before it takes at the
// rate known so far; longer is the host's idle time. Test: Policy.IdleGapBetweenGraphsDoesNotCollapseTheQuota.
constexpr double k_pause_factor = 3.0;
// x interval. Measured views are applied to a rate once they add up to this share of the interval.
// Test: Policy.QuotaAdaptsToAFastDevice.
constexpr double k_sample_share = 0.25;
// count. Devices whose rates a policy keeps (least recently used forgotten). Test: Policy.DevicesKeepTheirOwnRates.
constexpr int k_devices = 4;
// asks. Asks between two clock reads. Bench: bench-plans, byte at 0 (ask cost).
// Test: Policy.ClockIsReadEveryFewAsksAndAfterEachCheckpoint.
constexpr uint32_t k_clock_every = 8;

// --- The core: a checkpoint's round trip (RPC) -----------------------------------------------------
// share. Checkpoints cost at most this share of the compute: the interval stretches to the round
// trip divided by it. Test: Policy.RoundTripLengthensTheIntervalSoCheckpointsCostOnePercent; bench: rpc rows.
constexpr double k_cost_share = 0.01;
// checkpoints. The round trip is timed again every this many checkpoints of a device.
constexpr uint32_t k_cost_sample_every = 32;
// count. Round trips kept, timed at each checkpoint until this many are in; the interval follows
// their minimum.
constexpr uint32_t k_trip_samples = 8;
// count. The stretch leaves a graph at least this many checkpoints.
// Test: Policy.RoundTripStretchLeavesShortGraphsFourCheckpoints.
constexpr double k_min_graph_checkpoints = 4.0;

// --- The core: graphs --------------------------------------------------------------------------------
// nodes. Asks of one graph past which its end is not looked for and no plan is kept.
constexpr size_t k_graph_nodes = 1u << 16;
// nodes. A graph's first nodes remembered to see it begin again (a set that stays in the nearest
// cache). Test: Policy.AGraphBeginsWhereItsFirstNodesComeAgain; bench: bench-plans, byte at 0.
constexpr size_t k_graph_first_nodes = 64;
// count. Graphs whose last call time (held calls) or work is remembered.
// Test: Policy.ACallIsShortWhereOneBeginningWithItsGraphFinishedWithinTheInterval.
constexpr int k_graph_records = 8;
// count. Graphs told apart among those beginning at one node (graph_head.h): a call's ubatches.
// Test: RepeatedGraph.UbatchesBeginningAtOneNodeKeepTheirOwnCheckpoints.
constexpr int k_graph_ids = 16;

// --- Stable plans (stable_plan.h) ----------------------------------------------------------------
// x interval. A graph's views are cut this far apart in measured time (below the interval, so that
// noise moves no cut). Test: RepeatedGraph.ViewsAreCutByTheTimesTheNodesTook; bench: plans rows.
constexpr double k_target = 0.8;
// x interval. Cuts are kept while each view stays within this, beside its longest node; a view
// plan's (emulated_device.h) while its views stay within this of the longest allowed.
// Tests: RepeatedGraph.AShortGraphIsNotCutAndASlowerOneIsCutAgain,
// PlannedPolicy.NodesSlowerThanTheirWorkAreGivenTheTimeTheyTook; bench: plans rows, "moved".
constexpr double k_slower = 1.25;
// x. Cuts are kept while the graph needs no fewer than 1/this of its views (each a synchronize).
constexpr double k_faster = 2.0;
// calls. A plan that served a call is made again only after this many calls in a row out of its
// band (one slow call is the host's noise, not the graph's). View plans' views likewise.
// Test: RepeatedGraph.OneSlowCallMovesNoCheckpoint; bench: plans rows, "moved".
constexpr int k_plan_strays = 2;
// doublings. An uncut graph whose end stays unknown (outside calls, a host that pauses between its
// graphs) is measured again after k_plan_strays such calls, then twice as many each time it still
// fits, at most this many times over (every 128 calls).
// Tests: RepeatedGraph.AnUncutGraphWhoseEndStaysUnknownIsCutAgain,
// .AHostsPausesMeasureAnUncutGraphEverRarely; bench: plans rows, "moved".
constexpr int k_unknown_end_doublings = 6;
// Calls in a row out of a plan's band: out(in_band) counts one more call and says whether
// k_plan_strays in a row strayed (the plan is to be made again).
struct band_strays {
    int  n = 0;
    bool out(bool in_band) {
        n = in_band ? 0 : n + 1;
        return n >= k_plan_strays;
    }
};
// x. A node is the planned one while its work is within this factor of the planned node's (plus a
// few kFLOP: views and copies of a few elements). Test: PlannedPolicy.APlanIsFollowedWhileItsNodesAreThePlannedOnes.
constexpr double k_plan_work_slack = 2.0;
// share. A graph's timed nodes price its untimed ones where they did this share of its work.
constexpr double k_timed_share = 0.25;
// count. Graphs whose stable plans are kept.
constexpr int k_stable_plans = 8;
// count. Devices of one graph a stable plan prices (the host and a few GPUs or RPC servers).
constexpr size_t k_graph_devices = 8;

// --- The emulated-device strategy (emulated_device.h): ggml-vulkan on the host's cores ------------
// share. A view whose busy-waited tail is at most this share of its work may end at once.
// Test: SleepingPolicy.ViewsEndWhereTheFenceCanGo.
constexpr double k_spun_share = 0.1;
// quotas. How far past the quota a view may run to find a place with a node for the fence.
// Test: SleepingPolicy.ViewsHoldTenNodes.
constexpr double k_sleep_quotas = 2.0;
// share. A view may take this share of its graph and of what ran before it in its call or run.
// Test: SleepingPolicy.EachGraphKeepsTheShareOfItsOwnShape; bench: vulkan rows within 10% of the call.
constexpr double k_sleep_graph_share = 0.1;
// x. A view with no sure fence node that took less than this share of its work's time was not
// waited for: it is timed with the next. Test: PlannedPolicy.AViewNotWaitedForIsTimedWithTheNext.
constexpr double k_unwaited_share = 0.25;
// share. A view's time is shared among its nodes by what each took before, at least this share of
// what its work takes. Test: PlannedPolicy.NodesSlowerThanTheirWorkAreGivenTheTimeTheyTook.
constexpr double k_work_weight = 0.25;
// nodes per interval. Graphs whose nodes average more than 1/this of the interval get a view plan.
// Test: PlannedPolicy.AGraphOfFastNodesKeepsItsCheckpoints.
constexpr double k_plan_nodes_per_interval = 30.0;
// x interval. What a view costs in a plan beside its busy tail (a synchronize and the next submit).
// Test: PlannedPolicy.AKnownGraphsViewsEndWhereNothingSpins.
constexpr double k_plan_view_cost = 0.05;
// nodes. A planned view holds at most this many; a graph of more is not planned.
constexpr size_t k_plan_max_nodes = 256;
constexpr size_t k_plan_nodes     = 1u << 14;
// count. Graphs whose view plans are kept.
constexpr int k_view_plans = 4;
// ms. A graph no call told of goes on with the run of the graph before it when it begins within
// this of that one's computed end. Test: PlannedPolicy.OutsideCallsAGraphGoesOnWithItsRun.
constexpr double k_run_gap_ms = 100.0;
// x graph. What ran before a graph in its run counts up to this many times the graph's own time.
// Test: SleepingPolicy.AGraphLateInItsRunHoldsLongerViews.
constexpr double k_run_graphs = 1.0;

} // namespace llama_cancel::tuning
