// Data objects: every shape of concat/subrange checked byte for byte against a plain
// buffer through get_size, create_map, apply and copy_region; destructors run exactly once,
// on their queue, when the last sharer goes; FREE and MUNMAP give the region back; the
// region an applier receives is exactly that region; and a seeded random differential test
// runs 10^6 operations on data objects and on plain byte arrays side by side.
//
// The gcc variant uses dispatch_data_create_f/dispatch_data_apply_f only; the clang
// variant adds the block forms.
#include "check.h"

#include <sys/mman.h>

#ifdef GC_REFERENCE_LIBDISPATCH
// libdispatch exports the function forms without declaring them publicly.
typedef bool (*dispatch_data_applier_function_t)(void *context, dispatch_data_t region,
		size_t offset, const void *buffer, size_t size);
dispatch_data_t dispatch_data_create_f(const void *buffer, size_t size, dispatch_queue_t queue,
		dispatch_function_t destructor);
bool dispatch_data_apply_f(dispatch_data_t data, void *context, dispatch_data_applier_function_t applier);
#define DISPATCH_DATA_DESTRUCTOR_FREE_F ((dispatch_function_t)(uintptr_t)(void *)DISPATCH_DATA_DESTRUCTOR_FREE)
#endif

// MARK: - Random numbers (xorshift64*, seeded: a failure reproduces)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
static size_t rng_below(size_t n) { return n == 0 ? 0 : (size_t)(rng() % n); }

// MARK: - Checking a data object against the bytes it should hold

typedef struct {
    const unsigned char *expected;
    size_t size;
    size_t next_offset;  // where the next region must start
    size_t regions;
    size_t stop_after;   // return false after this many regions (SIZE_MAX: never)
    bool ok;
} walk_t;

static bool check_region(void *context, dispatch_data_t region, size_t offset, const void *buffer, size_t size) {
    walk_t *walk = context;
    if (offset != walk->next_offset || size == 0 || buffer == NULL || offset + size > walk->size ||
            memcmp(buffer, walk->expected + offset, size) != 0) {
        walk->ok = false;
        return false;
    }
#ifndef GC_REFERENCE_LIBDISPATCH
    // The region object is exactly this region (libdispatch passes a larger leaf for pieces).
    if (dispatch_data_get_size(region) != size) { walk->ok = false; return false; }
    const void *mapped = NULL;
    size_t mapped_size = 0;
    dispatch_data_t map = dispatch_data_create_map(region, &mapped, &mapped_size);
    if (mapped_size != size || memcmp(mapped, buffer, size) != 0) walk->ok = false;
    dispatch_release(map);
#else
    (void)region;
#endif
    walk->next_offset = offset + size;
    walk->regions++;
    return walk->regions < walk->stop_after;
}

/// Every way of reading `data` agrees with `expected[0..<size]`. Returns the region count.
static size_t check_data(dispatch_data_t data, const unsigned char *expected, size_t size) {
    CHECK(data != NULL);
    CHECK_EQ(dispatch_data_get_size(data), size);
    if (size == 0) CHECK(data == dispatch_data_empty);

    walk_t walk = {expected, size, 0, 0, SIZE_MAX, true};
    CHECK(dispatch_data_apply_f(data, &walk, check_region));
    CHECK(walk.ok);
    CHECK_EQ(walk.next_offset, size);

    const void *buffer = (const void *)1;
    size_t mapped_size = 12345;
    dispatch_data_t map = dispatch_data_create_map(data, &buffer, &mapped_size);
    CHECK_EQ(mapped_size, size);
    CHECK_EQ(dispatch_data_get_size(map), size);
    if (size > 0) CHECK(memcmp(buffer, expected, size) == 0);
    // A second map reuses the first flattening: same bytes, same address (GrandCentral
    // promises this; libdispatch on Linux flattens again).
    const void *again = NULL;
    dispatch_data_t map2 = dispatch_data_create_map(data, &again, NULL);
    if (size > 0) CHECK(memcmp(again, expected, size) == 0);
#ifndef GC_REFERENCE_LIBDISPATCH
    if (size > 0) CHECK(again == buffer);
#endif
    dispatch_release(map2);
    dispatch_release(map);

    size_t probes[4] = {0, size / 2, size ? size - 1 : 0, rng_below(size)};
    for (int i = 0; i < 4 && size > 0; i++) {
        size_t offset = SIZE_MAX;
        dispatch_data_t region = dispatch_data_copy_region(data, probes[i], &offset);
        size_t region_size = dispatch_data_get_size(region);
        CHECK(offset <= probes[i] && probes[i] < offset + region_size && offset + region_size <= size);
        const void *bytes = NULL;
        dispatch_data_t region_map = dispatch_data_create_map(region, &bytes, NULL);
        CHECK(memcmp(bytes, expected + offset, region_size) == 0);
        dispatch_release(region_map);
        dispatch_release(region);
    }
    size_t offset = 7;
    dispatch_data_t past = dispatch_data_copy_region(data, size, &offset);
    CHECK(past == dispatch_data_empty);
    CHECK_EQ(offset, size);
    return walk.regions;
}

// MARK: - Destructors that count

static atomic_long destroyed;
static atomic_long destroyed_off_queue;
static const char *destructor_queue_label = "com.grandcentral.tests.data-destructors";

static void counting_destructor(void *buffer) {
    const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    if (label == NULL || strcmp(label, destructor_queue_label) != 0) atomic_fetch_add(&destroyed_off_queue, 1);
    free(buffer);
    atomic_fetch_add(&destroyed, 1);
}

/// A data object over a malloc'ed copy of `bytes`, destroyed by counting_destructor on `queue`.
static dispatch_data_t counted_piece(const unsigned char *bytes, size_t size, dispatch_queue_t queue) {
    void *copy = malloc(size ? size : 1);
    memcpy(copy, bytes, size);
    return dispatch_data_create_f(copy, size, queue, counting_destructor);
}

static unsigned char pattern[1 << 16];

// MARK: - Shapes

static void shapes(void) {
    check_section("create: copy, empty, NULL buffer");
    for (size_t i = 0; i < sizeof pattern; i++) pattern[i] = (unsigned char)(rng() >> 24);
    dispatch_data_t empty = dispatch_data_create_f(pattern, 0, NULL, NULL);
    CHECK(empty == dispatch_data_empty);
    CHECK_EQ(dispatch_data_get_size(dispatch_data_empty), 0);
    CHECK(dispatch_data_create_f(NULL, 0, NULL, NULL) == dispatch_data_empty);
    dispatch_retain(dispatch_data_empty);   // global: retain and release do nothing
    dispatch_release(dispatch_data_empty);
    dispatch_release(dispatch_data_empty);
    check_data(dispatch_data_empty, pattern, 0);

    unsigned char local[100];
    memcpy(local, pattern, sizeof local);
    dispatch_data_t copied = dispatch_data_create_f(local, sizeof local, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
    memset(local, 0, sizeof local);  // DEFAULT copied: the object does not see this
    CHECK_EQ(check_data(copied, pattern, 100), 1);

    check_section("concat: with empty, of leaves, of trees");
    dispatch_data_t same = dispatch_data_create_concat(copied, dispatch_data_empty);
    CHECK(same == copied);
    dispatch_release(same);
    same = dispatch_data_create_concat(dispatch_data_empty, copied);
    CHECK(same == copied);
    dispatch_release(same);
    CHECK(dispatch_data_create_concat(dispatch_data_empty, dispatch_data_empty) == dispatch_data_empty);

    // 1..200 pieces of varying sizes (some empty), appended one at a time.
    dispatch_data_t built = dispatch_data_empty;
    size_t total = 0;
    for (int i = 0; i < 200; i++) {
        size_t n = (size_t)(i * 7 % 23);
        dispatch_data_t piece = dispatch_data_create_f(pattern + total, n, NULL, NULL);
        dispatch_data_t next = dispatch_data_create_concat(built, piece);
        dispatch_release(piece);
        dispatch_release(built);
        built = next;
        total += n;
        check_data(built, pattern, total);
    }
    // Prepending and joining trees of different heights.
    dispatch_data_t tail = dispatch_data_create_subrange(built, 1000, SIZE_MAX);
    dispatch_data_t head = dispatch_data_create_subrange(built, 0, 1000);
    check_data(head, pattern, 1000);
    check_data(tail, pattern + 1000, total - 1000);
    dispatch_data_t rejoined = dispatch_data_create_concat(head, tail);
    check_data(rejoined, pattern, total);
    dispatch_data_t small = dispatch_data_create_subrange(built, 3, 5);
    dispatch_data_t lopsided = dispatch_data_create_concat(small, rejoined);
    unsigned char expected[4096];
    memcpy(expected, pattern + 3, 5);
    memcpy(expected + 5, pattern, total);
    check_data(lopsided, expected, total + 5);
    dispatch_release(lopsided);
    lopsided = dispatch_data_create_concat(rejoined, small);
    memcpy(expected, pattern, total);
    memcpy(expected + total, pattern + 3, 5);
    check_data(lopsided, expected, total + 5);
    dispatch_release(lopsided);
    dispatch_release(small);
    dispatch_release(rejoined);
    dispatch_release(head);
    dispatch_release(tail);

    check_section("subrange: every range of a small tree, nested subranges, clamping");
    for (size_t offset = 0; offset <= 120; offset += 3) {
        for (size_t length = 0; length <= 130; length += 5) {
            dispatch_data_t range = dispatch_data_create_subrange(built, offset, length);
            size_t expect = offset >= total ? 0 : (length < total - offset ? length : total - offset);
            check_data(range, pattern + offset, expect);
            // Subrange of a subrange composes.
            if (expect > 5) {
                dispatch_data_t inner = dispatch_data_create_subrange(range, 2, expect - 4);
                check_data(inner, pattern + offset + 2, expect - 4);
                dispatch_data_t innermost = dispatch_data_create_subrange(inner, 1, 1);
                check_data(innermost, pattern + offset + 3, 1);
                dispatch_release(innermost);
                dispatch_release(inner);
            }
            dispatch_release(range);
        }
    }
    dispatch_data_t whole = dispatch_data_create_subrange(built, 0, total);
    CHECK(whole == built);
    dispatch_release(whole);
    CHECK(dispatch_data_create_subrange(built, total, 1) == dispatch_data_empty);
    CHECK(dispatch_data_create_subrange(built, SIZE_MAX, SIZE_MAX) == dispatch_data_empty);
    CHECK(dispatch_data_create_subrange(built, 5, 0) == dispatch_data_empty);
    dispatch_data_t clamp = dispatch_data_create_subrange(built, total - 3, SIZE_MAX);
    check_data(clamp, pattern + total - 3, 3);
    dispatch_release(clamp);

    check_section("apply stops when the applier returns false");
    walk_t walk = {pattern, total, 0, 0, 3, true};
    CHECK(!dispatch_data_apply_f(built, &walk, check_region));
    CHECK(walk.ok);
    CHECK_EQ(walk.regions, 3);
    walk_t none = {pattern, 0, 0, 0, 0, true};
    CHECK(dispatch_data_apply_f(dispatch_data_empty, &none, check_region));
    CHECK_EQ(none.regions, 0);

    dispatch_release(built);
    dispatch_release(copied);
}

// MARK: - Destructors

typedef struct {
    dispatch_data_t kept[8];
    size_t count;
} keeper_t;

static bool keep_regions(void *context, dispatch_data_t region, size_t offset, const void *buffer, size_t size) {
    (void)offset; (void)buffer; (void)size;
    keeper_t *keeper = context;
    dispatch_retain(region);   // a region may outlive the applier call
    keeper->kept[keeper->count++] = region;
    return keeper->count < 8;
}

static void destructors(void) {
    check_section("destructors run exactly once, on their queue, after the last sharer");
    dispatch_queue_t queue = dispatch_queue_create(destructor_queue_label, NULL);
    atomic_store(&destroyed, 0);
    enum { pieces = 64 };
    dispatch_data_t all = dispatch_data_empty;
    for (int i = 0; i < pieces; i++) {
        dispatch_data_t piece = counted_piece(pattern + i * 10, 10, queue);
        dispatch_data_t next = dispatch_data_create_concat(all, piece);
        dispatch_release(piece);
        dispatch_release(all);
        all = next;
    }
    // Pieces of the tree that share some regions with it and keep others alive.
    dispatch_data_t middle = dispatch_data_create_subrange(all, 95, 210);   // regions 9..30
    const void *bytes = NULL;
    dispatch_data_t map = dispatch_data_create_map(all, &bytes, NULL);
    keeper_t keeper = {{0}, 0};
    dispatch_data_apply_f(middle, &keeper, keep_regions);                    // regions 9..16
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK_EQ(atomic_load(&destroyed), 0);

    dispatch_release(all);
    // Every region outside 9..30 is gone now; the map is a copy and holds none.
    WAIT_FOR_COUNT(&destroyed, pieces - 22, 30);
    sleep_ms(20);
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK_EQ(atomic_load(&destroyed), pieces - 22);
    CHECK(memcmp(bytes, pattern, pieces * 10) == 0);
    dispatch_release(map);

    dispatch_release(middle);
    WAIT_FOR_COUNT(&destroyed, pieces - 8, 30);
    sleep_ms(20);
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK_EQ(atomic_load(&destroyed), pieces - 8);
    for (size_t i = 0; i < keeper.count; i++) {
#ifndef GC_REFERENCE_LIBDISPATCH   // libdispatch hands over the whole 10-byte leaf first
        CHECK_EQ(dispatch_data_get_size(keeper.kept[i]), i == 0 ? 5 : 10);
#endif
        dispatch_release(keeper.kept[i]);
    }
    WAIT_FOR_COUNT(&destroyed, pieces, 30);
    sleep_ms(20);
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK_EQ(atomic_load(&destroyed), pieces);
    CHECK_EQ(atomic_load(&destroyed_off_queue), 0);

    check_section("an empty buffer's destructor runs at once");
    atomic_store(&destroyed, 0);
    CHECK(counted_piece(pattern, 0, queue) == dispatch_data_empty);
    WAIT_FOR_COUNT(&destroyed, 1, 30);
    CHECK_EQ(atomic_load(&destroyed_off_queue), 0);

    check_section("DISPATCH_DATA_DESTRUCTOR_FREE frees the buffer (ASan checks)");
    void *owned = malloc(1000);
    memcpy(owned, pattern, 1000);
    dispatch_data_t freed = dispatch_data_create_f(owned, 1000, NULL, DISPATCH_DATA_DESTRUCTOR_FREE_F);
    dispatch_data_t piece = dispatch_data_create_subrange(freed, 10, 10);
    dispatch_release(freed);
    check_data(piece, pattern + 10, 10);
    dispatch_release(piece);
#ifndef __BLOCKS__
    // Without blocks the plain spelling is function-typed too.
    owned = malloc(10);
    dispatch_release(dispatch_data_create_f(owned, 10, NULL, DISPATCH_DATA_DESTRUCTOR_FREE));
#endif

#ifndef GC_REFERENCE_LIBDISPATCH   // libdispatch on Linux crashes here
    check_section("DISPATCH_DATA_DESTRUCTOR_MUNMAP unmaps the region with the last sharer");
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *mapping = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mapping != MAP_FAILED);
    memcpy(mapping, pattern, 2 * page);
    dispatch_data_t mapped = dispatch_data_create_f(mapping, 2 * page, NULL, DISPATCH_DATA_DESTRUCTOR_MUNMAP_F);
    dispatch_data_t part = dispatch_data_create_subrange(mapped, page - 4, 8);
    dispatch_release(mapped);
    unsigned char residency[2];
    CHECK_EQ(mincore(mapping, 2 * page, residency), 0);  // still mapped
    check_data(part, pattern + page - 4, 8);
    dispatch_release(part);
    CHECK(mincore(mapping, 2 * page, residency) == -1 && errno == ENOMEM);  // unmapped
#endif
    dispatch_release(queue);
}

// MARK: - Random differential test

enum { slots = 32, max_size = 1024 };

typedef struct {
    dispatch_data_t data;
    unsigned char bytes[max_size];
    size_t size;
} slot_t;

static slot_t model[slots];

static void replace(slot_t *slot, dispatch_data_t data, const unsigned char *bytes, size_t size) {
    unsigned char copy[max_size];
    memcpy(copy, bytes, size);   // `bytes` may be this slot's own
    dispatch_release(slot->data);
    slot->data = data;
    memcpy(slot->bytes, copy, size);
    slot->size = size;
}

static void differential(void) {
    check_section("10^6 random operations agree with plain byte arrays");
    dispatch_queue_t queue = dispatch_queue_create(destructor_queue_label, NULL);
    atomic_store(&destroyed, 0);
    long created_counted = 0;
    rng_state = 20261123;
    for (int i = 0; i < slots; i++) model[i].data = dispatch_data_empty;
    unsigned char scratch[max_size];
    for (long op = 0; op < 1000000; op++) {
        slot_t *a = &model[rng_below(slots)];
        slot_t *b = &model[rng_below(slots)];
        slot_t *out = &model[rng_below(slots)];
        switch (rng_below(16)) {
        case 0: case 1: {  // create: copied, freed or counted
            size_t n = rng_below(40);
            const unsigned char *src = pattern + rng_below(sizeof pattern - 64);
            dispatch_data_t d;
            switch (rng_below(3)) {
            case 0: d = dispatch_data_create_f(src, n, NULL, NULL); break;
            case 1: {
                void *owned = malloc(n ? n : 1);
                memcpy(owned, src, n);
                d = dispatch_data_create_f(owned, n, NULL, DISPATCH_DATA_DESTRUCTOR_FREE_F);
                break;
            }
            default: d = counted_piece(src, n, queue); created_counted++; break;
            }
            replace(out, d, src, n);
            break;
        }
        case 2: case 3: case 4: case 5: {  // concat (or, when too big, a subrange of it)
            dispatch_data_t d = dispatch_data_create_concat(a->data, b->data);
            memcpy(scratch, a->bytes, a->size);
            size_t n = a->size;
            size_t keep = b->size;
            if (n + keep > max_size) keep = max_size - n;
            memcpy(scratch + n, b->bytes, keep);
            if (keep < b->size) {
                dispatch_data_t cut = dispatch_data_create_subrange(d, 0, n + keep);
                dispatch_release(d);
                d = cut;
            }
            replace(out, d, scratch, n + keep);
            break;
        }
        case 6: case 7: case 8: {  // subrange, sometimes past the end
            size_t offset = rng_below(a->size + 8), length = rng_below(a->size + 8);
            if (rng_below(8) == 0) length = SIZE_MAX;
            dispatch_data_t d = dispatch_data_create_subrange(a->data, offset, length);
            size_t n = offset >= a->size ? 0 : (length < a->size - offset ? length : a->size - offset);
            CHECK_EQ(dispatch_data_get_size(d), n);
            if (n == 0) CHECK(d == dispatch_data_empty);
            replace(out, d, a->bytes + (n ? offset : 0), n);
            break;
        }
        case 9: case 10: {  // map
            const void *buffer = NULL;
            size_t n = 0;
            dispatch_data_t map = dispatch_data_create_map(a->data, &buffer, &n);
            CHECK_EQ(n, a->size);
            if (n) CHECK(memcmp(buffer, a->bytes, n) == 0);
            dispatch_release(map);
            break;
        }
        case 11: case 12: case 13: {  // apply, sometimes stopped early
            walk_t walk = {a->bytes, a->size, 0, 0, rng_below(4) == 0 ? 1 + rng_below(4) : SIZE_MAX, true};
            bool finished = dispatch_data_apply_f(a->data, &walk, check_region);
            CHECK(walk.ok);
            if (finished) CHECK_EQ(walk.next_offset, a->size);
            else CHECK_EQ(walk.regions, walk.stop_after);
            break;
        }
        default: {  // copy_region
            size_t location = rng_below(a->size + 2), offset = 0;
            dispatch_data_t region = dispatch_data_copy_region(a->data, location, &offset);
            if (location >= a->size) {
                CHECK(region == dispatch_data_empty);
                CHECK_EQ(offset, a->size);
            } else {
                size_t n = dispatch_data_get_size(region);
                CHECK(offset <= location && location < offset + n && offset + n <= a->size);
                const void *bytes = NULL;
                dispatch_data_t map = dispatch_data_create_map(region, &bytes, NULL);
                CHECK(memcmp(bytes, a->bytes + offset, n) == 0);
                dispatch_release(map);
            }
            dispatch_release(region);
            break;
        }
        }
    }
    for (int i = 0; i < slots; i++) {
        check_data(model[i].data, model[i].bytes, model[i].size);
        dispatch_release(model[i].data);
    }
    WAIT_FOR_COUNT(&destroyed, created_counted, 30);
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK_EQ(atomic_load(&destroyed), created_counted);
    dispatch_release(queue);
}

// MARK: - Blocks

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("block destructors and appliers");
    dispatch_queue_t queue = dispatch_queue_create(destructor_queue_label, NULL);
    __block atomic_long ran = 0;
    void *owned = malloc(64);
    memcpy(owned, pattern, 64);
    dispatch_data_t a = dispatch_data_create(owned, 64, queue, ^{
        free(owned);
        atomic_fetch_add(&ran, 1);
    });
    void *freed = malloc(32);
    memcpy(freed, pattern + 64, 32);
    dispatch_data_t b = dispatch_data_create(freed, 32, NULL, DISPATCH_DATA_DESTRUCTOR_FREE);
    dispatch_data_t c = dispatch_data_create(pattern + 96, 32, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
    dispatch_data_t ab = dispatch_data_create_concat(a, b);
    dispatch_data_t abc = dispatch_data_create_concat(ab, c);
    dispatch_release(a);
    dispatch_release(b);
    dispatch_release(c);
    dispatch_release(ab);
    __block size_t expected_offset = 0;
    __block int regions = 0;
    bool finished = dispatch_data_apply(abc, ^bool(dispatch_data_t region, size_t offset, const void *buffer, size_t size) {
        CHECK_EQ(offset, expected_offset);
        CHECK_EQ(dispatch_data_get_size(region), size);
        CHECK(memcmp(buffer, pattern + offset, size) == 0);
        expected_offset += size;
        regions++;
        return true;
    });
    CHECK(finished);
    CHECK_EQ(regions, 3);
    CHECK(!dispatch_data_apply(abc, ^bool(dispatch_data_t r, size_t o, const void *p, size_t s) {
        (void)r; (void)o; (void)p; (void)s;
        return false;
    }));
    check_data(abc, pattern, 128);
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK_EQ(atomic_load(&ran), 0);
    dispatch_release(abc);
    WAIT_FOR_COUNT(&ran, 1, 30);
    // The _F spellings work in a blocks translation unit too.
    owned = malloc(8);
    dispatch_release(dispatch_data_create_f(owned, 8, NULL, DISPATCH_DATA_DESTRUCTOR_FREE_F));
    dispatch_release(queue);
}
#endif

// MARK: - Misuse

// Hidden from the compiler so that -Wnonnull cannot see the NULL.
static volatile dispatch_data_t null_data;
static size_t *volatile null_offset_ptr;
static volatile size_t null_size_result;
static void null_size(void) { null_size_result = dispatch_data_get_size(null_data); }
static void null_concat(void) { dispatch_release(dispatch_data_create_concat(dispatch_data_empty, null_data)); }
static void null_offset(void) { dispatch_release(dispatch_data_copy_region(dispatch_data_empty, 0, null_offset_ptr)); }

int main(void) {
    check_start("data", 55);
#ifndef GC_REFERENCE_LIBDISPATCH
    check_section("misuse: a NULL data object is a client bug");
    expect_client_bug("dispatch_data_get_size", null_size);
    expect_client_bug("dispatch_data_create_concat", null_concat);
    expect_client_bug("dispatch_data_copy_region", null_offset);
#else
    (void)null_size; (void)null_concat; (void)null_offset;
#endif
    shapes();
    destructors();
    differential();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
