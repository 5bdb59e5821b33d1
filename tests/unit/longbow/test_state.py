"""What a micro-batch does to a key's history on the state store (:func:`dagger.longbow.state.settle`)."""

import json

from dagger.longbow.state import MAX_CHUNKS, Store, chunk, settle

DAY = 86_400_000


def stored(*entries):
    return chunk(entries)[0]


def test_a_batch_appends_its_entries_as_one_chunk_and_leaves_the_stored_ones_alone():
    old = stored((1_000, ["a"]), (2_000, ["b"]))
    history = settle([old], [(3_000, ["c"]), (4_000, [None])], keep_ms=DAY)
    assert history.store is Store.APPEND
    assert history.fresh == [(3_000, ["c"]), (4_000, [None])]
    assert history.entries == [(1_000, ["a"]), (2_000, ["b"]), (3_000, ["c"]), (4_000, [None])]
    assert json.loads(chunk(history.fresh)[0]) == [[3_000, ["c"]], [4_000, [None]]]


def test_a_key_with_nothing_stored_and_no_rows_with_a_rowtime_stores_nothing():
    assert settle([], [], keep_ms=DAY).store is Store.KEEP
    assert settle([stored((1_000, ["a"]))], [], keep_ms=DAY).store is Store.KEEP


def test_entries_older_than_the_document_duration_before_the_newest_are_not_read():
    old = stored((0, ["gone"]), (DAY, ["edge"]))
    history = settle([old], [(2 * DAY, ["new"])], keep_ms=DAY)
    assert history.entries == [(DAY, ["edge"]), (2 * DAY, ["new"])]  # both ends inclusive: DAY is kept
    assert history.store is Store.APPEND  # one dead entry of three: not yet worth a rewrite


def test_the_list_is_rewritten_without_the_dead_entries_once_they_outnumber_the_live_ones():
    old = stored(*[(ms, [str(ms)]) for ms in range(0, 10)])
    history = settle([old], [(DAY + 10, ["x"])], keep_ms=DAY)  # all ten are older than a day before DAY + 10
    assert history.store is Store.REWRITE
    assert history.entries == [(DAY + 10, ["x"])]
    assert json.loads(chunk(history.entries)[0]) == [[DAY + 10, ["x"]]]


def test_a_row_with_a_stored_rowtime_replaces_the_entry_as_a_bigtable_row_key_is_overwritten():
    first = stored((1_000, ["old"]), (2_000, ["kept"]))
    history = settle([first], [(1_000, ["new"])], keep_ms=DAY)
    assert history.entries == [(1_000, ["new"]), (2_000, ["kept"])]
    assert history.store is Store.APPEND
    # the replaced entry is dead weight: once the replaced outnumber the live, the list is rewritten
    again = settle([first, stored((1_000, ["new"])), stored((2_000, ["newer"]))], [(1_000, ["newest"])], DAY)
    assert again.entries == [(1_000, ["newest"]), (2_000, ["newer"])]
    assert again.store is Store.REWRITE


def test_a_late_row_older_than_the_kept_history_is_neither_stored_nor_read():
    history = settle([stored((2 * DAY, ["a"]))], [(0, ["late"])], keep_ms=DAY)
    assert history.entries == [(2 * DAY, ["a"])]
    assert history.fresh == [] and history.store is Store.KEEP


def test_a_list_of_many_chunks_is_compacted_into_one_so_a_read_of_the_history_stays_bounded():
    chunks = [stored((ms, [str(ms)])) for ms in range(MAX_CHUNKS)]
    history = settle(chunks, [(MAX_CHUNKS, ["last"])], keep_ms=DAY)
    assert history.store is Store.REWRITE
    assert len(history.entries) == MAX_CHUNKS + 1
    assert settle(chunks[:-1], [(MAX_CHUNKS, ["last"])], keep_ms=DAY).store is Store.APPEND


def test_each_entry_is_rewritten_a_bounded_number_of_times_over_a_long_run():
    """A key getting a row a minute for 30 days with a one-day duration: writes stay within 3x the rows."""
    minute, chunks, written = 60_000, [], 0
    for batch in range(30 * 24):  # an hour of rows per micro-batch
        fresh = [(batch * 60 * minute + i * minute, [str(i)]) for i in range(60)]
        history = settle(chunks, fresh, keep_ms=DAY)
        if history.store is Store.REWRITE:
            chunks = [chunk(history.entries)[0]]
            written += len(history.entries)
        elif history.store is Store.APPEND:
            chunks.append(chunk(history.fresh)[0])
            written += len(history.fresh)
        assert len(history.entries) == min(60 * (batch + 1), 24 * 60 + 1)  # a day of minutes, both ends
    rows = 30 * 24 * 60
    assert rows <= written <= 3 * rows
    assert sum(len(json.loads(c)) for c in chunks) <= 2 * (24 * 60 + 1) + 60  # the dead never pile up
