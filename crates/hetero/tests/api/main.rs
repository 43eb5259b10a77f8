//! API semantics and bad-input tests, written once over `Context<AnyDevice>`
//! and instantiated for every backend by [`backend_tests!`].

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod algorithms;
mod allocator;
mod bad_input;
mod completion;
mod foreign;
mod graphs;
mod limits;
mod peer;
mod semantics;
mod user_kernels;

use hetero::{AnyDevice, Backend, Context};

/// The first device of `backend`, or `None` (printing why) when this
/// machine cannot run it and `HETERO_REQUIRE` does not demand it.
pub fn context(backend: Backend) -> Option<Context<AnyDevice>> {
    hetero::testing::context_or_skip(backend).unwrap_or_else(|e| panic!("{e}"))
}

/// Instantiates every test body for one backend.
macro_rules! backend_tests {
    ($module:ident, $backend:expr) => {
        mod $module {
            use rstest::rstest;

            use super::{
                algorithms, allocator, bad_input, completion, context, foreign, graphs, limits, peer, semantics,
                user_kernels,
            };

            #[rstest]
            #[case::stream_order(semantics::stream_order)]
            #[case::raw_event_wait(semantics::raw_event_wait_orders_streams)]
            #[case::drop_defers_free(semantics::drop_defers_free_until_queued_work_is_done)]
            #[case::shared_mark(semantics::shared_mark_outlives_one_buffer)]
            #[case::query_with_blocker(semantics::query_before_and_after_completion)]
            #[case::elapsed_ordered(semantics::elapsed_times_are_ordered)]
            #[case::timed_from_recording(semantics::timed_recordings_start_when_recorded)]
            #[case::untimed_stream(semantics::untimed_streams_order_but_refuse_timing)]
            #[case::sync_events(semantics::sync_events_order_and_carry_no_time)]
            #[case::pinned_host_access_waits(semantics::pinned_host_access_waits)]
            #[case::wait_alone(semantics::a_wait_alone_holds_the_stream)]
            #[case::gate_holds_no_other(semantics::a_closed_gate_holds_no_other_stream)]
            #[case::wait_keeps_recording(semantics::a_wait_keeps_its_recording_when_the_event_is_recorded_again)]
            #[case::gate_reuse(semantics::gate_words_are_reused_without_releasing_a_new_gate)]
            #[case::shared_stream(semantics::threads_sharing_a_stream_wait_for_their_own_work)]
            #[case::shared_kernel(semantics::threads_launching_one_kernel_keep_their_arguments)]
            #[case::recording_then_idle(semantics::a_completed_recording_leaves_its_stream_idle)]
            #[case::helpers(semantics::helpers_upload_download_zeros_and_whole_buffers)]
            #[case::copy_out_of_bounds(bad_input::copy_out_of_bounds)]
            #[case::copy_length_mismatch(bad_input::copy_length_mismatch)]
            #[case::zero_length_copies(bad_input::zero_length_copies_are_no_ops)]
            #[case::foreign_objects(bad_input::objects_of_another_device)]
            #[case::foreign_raw_handles(bad_input::raw_handles_of_another_device)]
            #[case::bad_launch_shape(bad_input::launch_shapes_beyond_limits)]
            #[case::unknown_kernel(bad_input::kernel_not_in_module)]
            #[case::build_failure(bad_input::build_failure_carries_log)]
            #[case::out_of_memory(bad_input::out_of_memory_leaves_device_usable)]
            #[case::kernel_name_with_nul(bad_input::kernel_name_with_nul)]
            #[case::argument_count(bad_input::argument_count_checked)]
            #[case::argument_types(bad_input::argument_types_checked)]
            #[case::range_messages(bad_input::range_messages_read_as_written)]
            #[case::grid_beyond_limits(bad_input::grid_beyond_limits)]
            #[case::grid_beyond_block_count(bad_input::grids_beyond_the_block_count_are_refused)]
            #[case::over_aligned_pinned(bad_input::over_aligned_pinned_types)]
            #[case::disjoint_halves(semantics::disjoint_halves_are_not_serialised)]
            #[case::own_kernels(user_kernels::own_kernels_run_everywhere)]
            #[case::struct_arguments(user_kernels::struct_arguments_checked)]
            #[case::nested_struct_arguments(user_kernels::nested_struct_arguments_checked)]
            #[case::host_registrations(user_kernels::host_registrations_checked)]
            #[case::host_implementation_faults(user_kernels::host_implementation_faults_are_sticky)]
            #[case::faulted_reads_do_not_poison(user_kernels::a_faulted_streams_reads_do_not_poison_a_buffer)]
            #[case::failed_future_stays_failed(user_kernels::a_failed_future_stays_failed)]
            #[case::cache_reuse(allocator::cached_blocks_are_reused_and_counted)]
            #[case::cache_not_reused_elsewhere(allocator::blocks_in_use_elsewhere_are_not_reused)]
            #[case::cache_same_stream(allocator::same_stream_reuse_is_ordered)]
            #[case::cache_options(allocator::caps_trim_fill_and_pinned_zeros)]
            #[case::direct_allocation(allocator::direct_allocation_caches_nothing)]
            #[case::live_handles(allocator::live_handles_come_back_after_trim)]
            #[case::stream_future(completion::stream_future_resolves_after_its_work)]
            #[case::event_future(completion::event_futures_resolve_when_reached)]
            #[case::callbacks(completion::callbacks_run_in_order_after_the_work)]
            #[case::drop_with_callbacks(completion::dropping_everything_with_callbacks_pending)]
            #[case::tokio(completion::tokio_tasks_await_their_streams)]
            #[case::forgotten_gate_drops(semantics::drops_never_wait_for_a_forgotten_gate)]
            #[case::forgotten_gate_device_drop(semantics::device_drop_opens_forgotten_gates)]
            #[case::blocking_copy_shared_stream(semantics::enqueue_is_not_held_by_a_blocking_copy)]
            #[case::kernel_limits(limits::kernels_run_at_the_block_size_their_limits_allow)]
            #[case::events_before_synchronize(limits::events_before_a_synchronize_have_completed)]
            #[case::offset_arguments(semantics::arguments_at_offsets_outlive_their_queued_launches)]
            #[case::overlapping_offsets(semantics::arguments_at_overlapping_offsets_are_released_safely)]
            #[case::changed_arguments(semantics::launches_take_their_own_arguments_when_one_changes)]
            #[case::whole_buffer_arguments(semantics::whole_buffer_arguments_are_ordered_by_their_slices)]
            #[case::graph_replays(graphs::replays_run_the_recorded_work_with_changed_arguments)]
            #[case::graph_streams(graphs::graph_streams_are_ordered_by_graph_events)]
            #[case::graph_rebinding(graphs::rebinding_changes_the_buffer_of_later_replays)]
            #[case::graph_disjoint_bindings(graphs::several_bindings_are_lent_at_once)]
            #[case::graph_ordering(graphs::replays_are_ordered_against_streams_outside_the_graph)]
            #[case::graph_queued_arguments(graphs::queued_replays_keep_their_arguments)]
            #[case::graph_drop_queued(graphs::dropping_a_graph_with_replays_queued)]
            #[case::graph_recording_errors(graphs::recording_errors_end_the_recording)]
            #[case::graph_changes_refused(graphs::graph_changes_that_do_not_fit_are_refused)]
            #[case::graph_other_device(graphs::graphs_of_another_device_are_refused)]
            #[case::graph_fault_sticky(graphs::a_fault_in_a_replay_is_sticky)]
            #[case::graph_copies_and_shapes(graphs::copies_and_shapes_change_between_replays)]
            #[case::algorithms_reference(algorithms::algorithms_match_a_cpu_reference)]
            #[case::algorithms_numeric_rules(algorithms::algorithms_follow_the_numeric_rules)]
            #[case::algorithms_ordered(algorithms::algorithm_results_are_ordered_across_streams)]
            #[case::algorithms_bad_input(algorithms::algorithms_refuse_bad_input)]
            #[case::algorithms_deterministic(algorithms::deterministic_sums_have_the_fixed_orders_bits)]
            #[case::foreign_release(foreign::adopted_memory_goes_back_only_after_queued_work)]
            #[case::foreign_handles(foreign::native_handles_name_the_same_memory)]
            #[case::foreign_streams(foreign::adopted_streams_order_and_outlive_their_handle)]
            #[case::foreign_refusals(foreign::foreign_handles_of_the_wrong_kind_are_refused)]
            #[case::dlpack_round_trip(foreign::dlpack_round_trips_without_a_copy)]
            #[case::dlpack_handshake(foreign::dlpack_import_waits_for_the_producer_on_the_device)]
            #[case::dlpack_refusals(foreign::dlpack_refuses_what_it_cannot_represent)]
            fn api(#[case] body: fn(&hetero::Context)) {
                if let Some(ctx) = context($backend) {
                    body(&ctx);
                }
            }

            #[rstest]
            #[case::copies_both_ways(peer::peer_copies_of_ranges_both_ways)]
            #[case::event_waits(peer::cross_device_event_waits)]
            #[case::gate_holds_the_other(peer::a_gate_on_one_device_holds_the_others_dependent_work)]
            #[case::drops_with_peer_work(peer::dropping_a_device_with_peer_work_queued)]
            #[case::buffer_refused(peer::a_buffer_of_one_device_is_refused_on_the_other)]
            #[case::fault_reaches_the_other(peer::a_fault_on_one_device_reaches_the_other)]
            #[case::routes(peer::routes_are_named)]
            #[case::opposite_copies(peer::opposite_peer_copies_do_not_deadlock)]
            #[case::gated_copy_holds_no_other(peer::a_gated_peer_copy_holds_no_other_stream)]
            #[case::wait_ends_with_its_event(peer::a_wait_on_a_peer_event_ends_with_its_event)]
            #[case::failed_far_read(peer::a_failed_far_read_leaves_the_far_buffer_usable)]
            #[case::large_copies_in_flight(peer::large_peer_copies_in_flight_keep_their_own_bytes)]
            #[case::foreign_stream_refused(foreign::a_stream_of_one_device_is_refused_by_the_other)]
            #[case::dropped_far_buffer(peer::a_far_buffer_dropped_under_a_held_copy_is_not_reused)]
            fn two_devices(#[case] body: fn(&hetero::Context, &hetero::Context)) {
                if let Some((a, b)) = hetero::testing::context_pair_or_skip($backend).unwrap_or_else(|e| panic!("{e}"))
                {
                    body(&a, &b);
                }
            }

            #[rstest]
            fn gated_two_stream_chain(#[values(1, 2, 3, 4)] seed: u64) {
                if let Some(ctx) = context($backend) {
                    semantics::gated_two_stream_chain(&ctx, seed);
                }
            }

            #[rstest]
            fn subrange_copies(
                #[values((0, 0, 8), (5, 3, 8), (17, 40, 7), (0, 56, 8), (63, 0, 1), (10, 20, 0))] case: (
                    usize,
                    usize,
                    usize,
                ),
            ) {
                if let Some(ctx) = context($backend) {
                    semantics::subrange_copies(&ctx, case.0, case.1, case.2);
                }
            }
        }
    };
}

backend_tests!(host, hetero::Backend::Host);
backend_tests!(opencl, hetero::Backend::OpenCl);
backend_tests!(cuda, hetero::Backend::Cuda);
backend_tests!(hip, hetero::Backend::Hip);
