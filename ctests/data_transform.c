// dispatch_data_create_with_transform and dispatch_data_create_alloc (private.h): every
// format pair, valid and invalid input, compared byte for byte with what the toolchain's
// libdispatch returns on Linux (the expected bytes below were printed by it; run this file
// with ctests/run-reference.sh to see it agree). Inputs are given as one region and, for
// the formats libdispatch reads region-safely (all but base32/base64 decoding), as a
// concatenation of one-byte regions too, so region boundaries cannot change a result.
//
// A UTF-8 byte-order mark that starts UTF-8 input is dropped when converting to UTF-16
// (the output has its own); libdispatch drops it only when its three bytes sit in the first
// region, so those cases are single-region here, and GrandCentral drops it whatever the
// regions.
//
// Where GrandCentral differs on purpose, the case is under #ifndef GC_REFERENCE_LIBDISPATCH:
// base32hex decoding (libdispatch rejects every base32hex digit; here it round-trips) and
// padding in a partial group ("QQ=", libdispatch reads out of bounds and crashes; here NULL).
#include "check.h"

#ifdef GC_REFERENCE_LIBDISPATCH
// The toolchain ships no private.h; its libdispatch.so exports these.
typedef const struct dispatch_data_format_type_s *dispatch_data_format_type_t;
extern const struct dispatch_data_format_type_s _dispatch_data_format_type_none,
		_dispatch_data_format_type_base32, _dispatch_data_format_type_base32hex,
		_dispatch_data_format_type_base64, _dispatch_data_format_type_utf8,
		_dispatch_data_format_type_utf16le, _dispatch_data_format_type_utf16be,
		_dispatch_data_format_type_utf_any;
#define DISPATCH_DATA_FORMAT_TYPE_NONE (&_dispatch_data_format_type_none)
#define DISPATCH_DATA_FORMAT_TYPE_BASE32 (&_dispatch_data_format_type_base32)
#define DISPATCH_DATA_FORMAT_TYPE_BASE32HEX (&_dispatch_data_format_type_base32hex)
#define DISPATCH_DATA_FORMAT_TYPE_BASE64 (&_dispatch_data_format_type_base64)
#define DISPATCH_DATA_FORMAT_TYPE_UTF8 (&_dispatch_data_format_type_utf8)
#define DISPATCH_DATA_FORMAT_TYPE_UTF16LE (&_dispatch_data_format_type_utf16le)
#define DISPATCH_DATA_FORMAT_TYPE_UTF16BE (&_dispatch_data_format_type_utf16be)
#define DISPATCH_DATA_FORMAT_TYPE_UTF_ANY (&_dispatch_data_format_type_utf_any)
dispatch_data_t dispatch_data_create_with_transform(dispatch_data_t data,
		dispatch_data_format_type_t input, dispatch_data_format_type_t output);
dispatch_data_t dispatch_data_create_alloc(size_t size, void **buffer_ptr);
extern const dispatch_block_t _dispatch_data_destructor_none;
#define DISPATCH_DATA_DESTRUCTOR_NONE (_dispatch_data_destructor_none)
#endif

#define NONE DISPATCH_DATA_FORMAT_TYPE_NONE
#define B32 DISPATCH_DATA_FORMAT_TYPE_BASE32
#define B32HEX DISPATCH_DATA_FORMAT_TYPE_BASE32HEX
#define B64 DISPATCH_DATA_FORMAT_TYPE_BASE64
#define UTF8 DISPATCH_DATA_FORMAT_TYPE_UTF8
#define UTF16LE DISPATCH_DATA_FORMAT_TYPE_UTF16LE
#define UTF16BE DISPATCH_DATA_FORMAT_TYPE_UTF16BE
#define UTF_ANY DISPATCH_DATA_FORMAT_TYPE_UTF_ANY

static dispatch_data_t bytes(const char *s, size_t n) {
#ifdef __BLOCKS__
	return dispatch_data_create(s, n, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
#else
	return dispatch_data_create_f(s, n, NULL, NULL);
#endif
}

// The same bytes as a concatenation of one-byte regions.
static dispatch_data_t pieces(const char *s, size_t n) {
	dispatch_data_t d = dispatch_data_empty;
	for (size_t i = 0; i < n; i++) {
		dispatch_data_t piece = bytes(s + i, 1);
		dispatch_data_t joined = dispatch_data_create_concat(d, piece);
		dispatch_release(piece);
		dispatch_release(d);
		d = joined;
	}
	return d;
}

static void check_bytes(int line, const char *what, dispatch_data_t d, const char *want, size_t want_size) {
	if (d == NULL) check_fail(__FILE__, line, "%s: NULL, expected %zu bytes", what, want_size);
	const void *p = NULL;
	size_t size = 0;
	dispatch_data_t map = dispatch_data_create_map(d, &p, &size);
	if (size != want_size || (size > 0 && memcmp(p, want, size) != 0)) {
		fprintf(stderr, "got:");
		for (size_t i = 0; i < size; i++) fprintf(stderr, " %02x", ((const unsigned char *)p)[i]);
		fprintf(stderr, "\n");
		check_fail(__FILE__, line, "%s: %zu bytes, expected %zu", what, size, want_size);
	}
	dispatch_release(map);
}

// `in` (a literal) transformed from `from` to `to` must give `out` (a literal), or NULL
// when `out` is NULL; checked on one region, and on one-byte regions when `split`.
static void expect_case(int line, const char *what, const char *in, size_t in_size,
		dispatch_data_format_type_t from, dispatch_data_format_type_t to,
		const char *out, size_t out_size, bool split) {
	for (int shape = 0; shape < (split ? 2 : 1); shape++) {
		dispatch_data_t d = shape == 0 ? bytes(in, in_size) : pieces(in, in_size);
		dispatch_data_t r = dispatch_data_create_with_transform(d, from, to);
		if (out == NULL) {
			if (r != NULL) check_fail(__FILE__, line, "%s: expected NULL, got %zu bytes", what,
					dispatch_data_get_size(r));
		} else {
			check_bytes(line, what, r, out, out_size);
			dispatch_release(r);
		}
		dispatch_release(d);
	}
}
#define OK(what, in, from, to, out) \
	expect_case(__LINE__, what, in, sizeof(in) - 1, from, to, out, sizeof(out) - 1, true)
#define OK1(what, in, from, to, out) \
	expect_case(__LINE__, what, in, sizeof(in) - 1, from, to, out, sizeof(out) - 1, false)
#define BAD(what, in, from, to) expect_case(__LINE__, what, in, sizeof(in) - 1, from, to, NULL, 0, true)
#define BAD1(what, in, from, to) expect_case(__LINE__, what, in, sizeof(in) - 1, from, to, NULL, 0, false)

static void binary_formats(void) {
	check_section("base64");
	OK("base64 of empty", "", NONE, B64, "");
	OK("base64 f", "f", NONE, B64, "Zg==");
	OK("base64 fo", "fo", NONE, B64, "Zm8=");
	OK("base64 foo", "foo", NONE, B64, "Zm9v");
	OK("base64 foobar", "foobar", NONE, B64, "Zm9vYmFy");
	OK("base64 binary", "\x00\xff\xfe\x80", NONE, B64, "AP/+gA==");
	OK1("base64 decode", "Zm9vYmFy", B64, NONE, "foobar");
	OK1("base64 decode padded", "Zm8=", B64, NONE, "fo");
	OK1("base64 decode blanks", " Zm9v\nYm\tFy ", B64, NONE, "foobar");
	OK1("base64 decode partial group dropped", "Zm9vY", B64, NONE, "foo");
	OK1("base64 '=' mid-stream is a zero digit", "QQ==QUJD", B64, NONE, "\x41\x00\x00\x41");
	BAD1("base64 decode bad character", "Zm9v!", B64, NONE);
	BAD1("base64 decode '-' (not url-safe)", "Zm-v", B64, NONE);
	BAD1("base64 decode CR", "Zm9v\r\n", B64, NONE);
	BAD1("base64 decode high byte", "Zm9\xc3", B64, NONE);
	OK1("base64 to base32", "Zm9v", B64, B32, "MZXW6===");
	OK1("base64 to base64 normalizes", " Zm9v ", B64, B64, "Zm9v");

	check_section("base32");
	OK("base32 f", "f", NONE, B32, "MY======");
	OK("base32 fo", "fo", NONE, B32, "MZXQ====");
	OK("base32 foo", "foo", NONE, B32, "MZXW6===");
	OK("base32 foob", "foob", NONE, B32, "MZXW6YQ=");
	OK("base32 fooba", "fooba", NONE, B32, "MZXW6YTB");
	OK("base32 foobar", "foobar", NONE, B32, "MZXW6YTBOI======");
	OK1("base32 decode", "MZXW6YTBOI======", B32, NONE, "foobar");
	OK1("base32 decode foob", "MZXW6YQ=", B32, NONE, "foob");
	OK1("base32 decode foo", "MZXW6===", B32, NONE, "foo");
	OK1("base32 decode fo", "MZXQ====", B32, NONE, "fo");
	OK1("base32 decode f", "MY======", B32, NONE, "f");
	OK1("base32 eight pads are five zero bytes", "========", B32, NONE, "\0\0\0\0\0");
	BAD1("base32 decode lower case", "mzxw6yq=", B32, NONE);
	BAD1("base32 decode '1'", "MZXW6YQ1", B32, NONE);
	OK1("base32 to base64", "MZXW6===", B32, B64, "Zm9v");

	check_section("base32hex");
	OK("base32hex f", "f", NONE, B32HEX, "CO======");
	OK("base32hex a", "a", NONE, B32HEX, "C4======");
	OK("base32hex foobar", "foobar", NONE, B32HEX, "CPNMUOJ1E8======");
#ifndef GC_REFERENCE_LIBDISPATCH
	OK1("base32hex decode (libdispatch: NULL)", "CPNMUOJ1E8======", B32HEX, NONE, "foobar");
	BAD1("base32hex decode 'W'", "CPNMUOJW", B32HEX, NONE);
	check_section("padding in a partial group (libdispatch crashes)");
	BAD1("base64 QQ=", "QQ=", B64, NONE);
	BAD1("base64 ====", "====", B64, NONE);
	BAD1("base32 7 digits with a pad", "MZXW6Y=", B32, NONE);
#else
	BAD1("base32hex decode (libdispatch)", "CPNMUOJ1E8======", B32HEX, NONE);
#endif

	check_section("none");
	OK("none to none", "\x01\x02", NONE, NONE, "\x01\x02");
	OK1("empty stays empty", "", B64, NONE, "");
}

static void text_formats(void) {
	check_section("utf8 to utf16");
	OK("a é 😀 to utf16le", "a\xc3\xa9\xf0\x9f\x98\x80", UTF8, UTF16LE,
			"\xff\xfe" "a\0" "\xe9\0" "\x3d\xd8\x00\xde");
	OK("a é 😀 to utf16be", "a\xc3\xa9\xf0\x9f\x98\x80", UTF8, UTF16BE,
			"\xfe\xff" "\0a" "\0\xe9" "\xd8\x3d\xde\x00");
	OK("euro sign", "\xe2\x82\xac", UTF8, UTF16LE, "\xff\xfe\xac\x20");
	OK1("a leading utf8 mark is the output's mark", "\xef\xbb\xbf" "a", UTF8, UTF16LE, "\xff\xfe" "a\0");
	OK1("only the first mark", "\xef\xbb\xbf\xef\xbb\xbf" "a", UTF8, UTF16LE, "\xff\xfe\xff\xfe" "a\0");
	OK("a mark later is a character", "a\xef\xbb\xbf", UTF8, UTF16LE, "\xff\xfe" "a\0\xff\xfe");
	OK1("mark only", "\xef\xbb\xbf", UTF8, UTF16BE, "\xfe\xff");
	OK("5-byte range lead taken as 4", "\xf5\x80\x80\x80", UTF8, UTF16LE, "\xff\xfe\xc0\xd8\x00\xdc");
	OK("overlong accepted", "\xc0\x80", UTF8, UTF16LE, "\xff\xfe\x00\x00");
	OK("continuation bits unchecked", "\xc3\x41", UTF8, UTF16LE, "\xff\xfe\xc1\x00");
	OK("U+DFFF passes", "\xed\xbf\xbf", UTF8, UTF16LE, "\xff\xfe\xff\xdf");
	BAD("continuation byte as lead", "a\x80", UTF8, UTF16LE);
	BAD("0xF8 lead", "\xf8\x80\x80\x80\x80", UTF8, UTF16LE);
	BAD("sequence cut short", "a\xc3", UTF8, UTF16LE);
	BAD("surrogate code point", "\xed\xa0\x80", UTF8, UTF16LE);

	check_section("utf16 to utf8");
	OK("utf16le with its mark", "\xff\xfe" "a\0\xe9\0", UTF16LE, UTF8, "a\xc3\xa9");
	OK("utf16le without a mark", "a\0\xe9\0", UTF16LE, UTF8, "a\xc3\xa9");
	OK("utf16be", "\xfe\xff\0a\x20\xac", UTF16BE, UTF8, "a\xe2\x82\xac");
	OK("utf16le pair", "\x3d\xd8\x00\xde", UTF16LE, UTF8, "\xf0\x9f\x98\x80");
	OK("mark only", "\xff\xfe", UTF16LE, UTF8, "");
	OK("mark only to utf16", "\xff\xfe", UTF16LE, UTF16LE, "");
	OK("a mark later is a character", "a\0\xff\xfe", UTF16LE, UTF8, "a\xef\xbb\xbf");
	OK("utf8 output drops one leading mark", "\xff\xfe\xff\xfe" "a\0", UTF16LE, UTF8, "a");
	OK("... only one", "\xff\xfe\xff\xfe\xff\xfe" "a\0", UTF16LE, UTF8, "\xef\xbb\xbf" "a");
	OK("reversed mark later", "a\0\xfe\xff", UTF16LE, UTF8, "a\xef\xbf\xbe");
	OK("U+10FFFF", "\xff\xdb\xff\xdf", UTF16LE, UTF8, "\xf4\x8f\xbf\xbf");
	OK("utf16le to utf16be", "a\0", UTF16LE, UTF16BE, "\xfe\xff\0a");
	OK("utf16le to utf16le adds a mark", "a\0", UTF16LE, UTF16LE, "\xff\xfe" "a\0");
	BAD("reversed mark", "\xfe\xff" "a\0", UTF16LE, UTF8);
	BAD("odd length", "a\0b", UTF16LE, UTF8);
	BAD("lone low surrogate", "\x00\xdc", UTF16LE, UTF8);
	BAD("high surrogate at the end", "a\0\x3d\xd8", UTF16LE, UTF8);
	BAD("high surrogate then a letter", "\x3d\xd8" "a\0", UTF16LE, UTF8);

	check_section("utf_any");
	OK("FF FE is utf16le", "\xff\xfe" "a\0", UTF_ANY, UTF8, "a");
	OK("FE FF is utf16be", "\xfe\xff\0a", UTF_ANY, UTF8, "a");
	OK("no mark is utf8", "ab", UTF_ANY, UTF16LE, "\xff\xfe" "a\0b\0");
	BAD("one byte", "a", UTF_ANY, UTF8);
	BAD("empty", "", UTF_ANY, UTF8);
	BAD("utf_any as output", "ab", UTF8, UTF_ANY);
	BAD("utf_any to utf_any", "ab", UTF_ANY, UTF_ANY);

	check_section("utf8 to utf8 is the object itself, unchecked, unless it starts with a mark");
	dispatch_data_t d = bytes("\x80\xff", 2);
	dispatch_data_t r = dispatch_data_create_with_transform(d, UTF8, UTF8);
	CHECK(r == d);
	dispatch_release(r);
	dispatch_release(d);
	OK1("utf8 mark dropped", "\xef\xbb\xbf" "a", UTF8, UTF8, "a");
	OK1("utf8 mark only", "\xef\xbb\xbf", UTF8, UTF8, "");
	OK1("utf_any utf8 mark dropped", "\xef\xbb\xbf" "a", UTF_ANY, UTF8, "a");

	check_section("families do not mix");
	BAD("none to utf8", "ab", NONE, UTF8);
	BAD("utf8 to none", "ab", UTF8, NONE);
	BAD("utf8 to base64", "ab", UTF8, B64);
	BAD("utf16le to base32", "a\0", UTF16LE, B32);
	BAD("base64 to utf8", "Zm9v", B64, UTF8);
	BAD("none to utf_any", "ab", NONE, UTF_ANY);
}

static void alloc_and_none(void) {
	check_section("dispatch_data_create_alloc");
	void *p = (void *)1;
	dispatch_data_t d = dispatch_data_create_alloc(0, &p);
	CHECK(d == dispatch_data_empty);
	CHECK(p == NULL);
	d = dispatch_data_create_alloc(100, &p);
	CHECK(p != NULL);
	CHECK_EQ(dispatch_data_get_size(d), 100);
	memset(p, 'x', 100);
	const void *q = NULL;
	size_t size = 0;
	dispatch_data_t map = dispatch_data_create_map(d, &q, &size);
	CHECK(q == p);  // a one-region object maps to its own bytes
	CHECK_EQ(size, 100);
	CHECK(((const char *)q)[99] == 'x');
	dispatch_release(map);
	dispatch_release(d);
	d = dispatch_data_create_alloc(16, NULL);
	CHECK_EQ(dispatch_data_get_size(d), 16);
	dispatch_release(d);

	check_section("DISPATCH_DATA_DESTRUCTOR_NONE: the caller's buffer, not copied");
	static char buffer[8] = "abcdefg";
#ifdef __BLOCKS__
	d = dispatch_data_create(buffer, sizeof buffer, NULL, DISPATCH_DATA_DESTRUCTOR_NONE);
	map = dispatch_data_create_map(d, &q, &size);
	CHECK(q == buffer);
	dispatch_release(map);
	dispatch_release(d);
#endif
#ifndef GC_REFERENCE_LIBDISPATCH
	d = dispatch_data_create_f(buffer, sizeof buffer, NULL, DISPATCH_DATA_DESTRUCTOR_NONE_F);
	map = dispatch_data_create_map(d, &q, &size);
	CHECK(q == buffer);
	dispatch_release(map);
	dispatch_release(d);
#endif
}

int main(void) {
	check_start("data_transform", 50);
	binary_formats();
	text_formats();
	alloc_and_none();
	check_pass();
}
