// llama_cancel_struct_size and llama_cancel_field_offset answer, for every struct and field of the
// generated tables (src/abi/abi_layouts.inc: llama-cancel.h's structs, llama.h's llama_batch,
// llama_model_params and llama_context_params, and mtmd.h's with libmtmd), this program's own
// sizeof and offsetof, compiled here against the same headers; the fields of each struct, in the
// header's order, fill it with no gap but alignment padding; without libmtmd the library knows no
// mtmd.h struct. Whether the tables list every field of the headers is layouts_generated's check.
#include "llama-cancel.h"
#ifdef LLAMA_CANCEL_WITH_MTMD
#    include "mtmd.h"
#endif

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace {

struct field_entry {
    const char * name;
    size_t       offset;
    size_t       size;
    size_t       align;
};

struct struct_entry {
    const char *        name;
    size_t              size;
    size_t              align;
    const field_entry * fields;
};

// What src/abi/abi.cpp's tables hold (name, offsetof), and here each field's size and alignment too.
#define LC_FIELD(S, F)       { #F, offsetof(S, F), sizeof(S::F), alignof(decltype(S::F)) }
#define LC_END               { nullptr, 0, 0, 0 }
#define LC_STRUCT(S, FIELDS) { #S, sizeof(S), alignof(S), FIELDS }

#include "abi/abi_layouts.inc"

const struct_entry header_structs[] = { LC_HEADER_STRUCTS };
const struct_entry llama_structs[]  = { LC_LLAMA_STRUCTS };

size_t align_up(size_t n, size_t align) {
    return (n + align - 1) / align * align;
}

// Size and every field's offset as the library answers them, against this program's.
void expect_library_answers(const struct_entry & s) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(llama_cancel_struct_size(s.name), static_cast<int64_t>(s.size));
    int n = 0;
    for (const field_entry * f = s.fields; f->name != nullptr; ++f, ++n) {
        EXPECT_EQ(llama_cancel_field_offset(s.name, f->name), static_cast<int64_t>(f->offset))
            << s.name << "." << f->name;
    }
    EXPECT_GT(n, 0);
    EXPECT_EQ(llama_cancel_field_offset(s.name, "no_such_field"), -1);
}

// In the header's order, each field starts at the first byte its alignment allows after the one
// before it, and the struct ends where its alignment allows after the last: a field missing from
// the table would leave a gap wider than padding (one smaller than the padding beside it excepted).
void expect_fields_fill(const struct_entry & s) {
    SCOPED_TRACE(s.name);
    size_t end = 0;
    for (const field_entry * f = s.fields; f->name != nullptr; ++f) {
        EXPECT_EQ(f->offset, align_up(end, f->align)) << s.name << "." << f->name;
        end = f->offset + f->size;
    }
    EXPECT_EQ(s.size, align_up(end, s.align)) << s.name << ": its fields end at byte " << end;
}

TEST(Abi, EveryLlamaCancelFieldIsTheCompiledOffset) {
    for (const auto & s : header_structs) {
        expect_library_answers(s);
        expect_fields_fill(s);
    }
}

TEST(Abi, EveryLlamaHFieldIsTheCompiledOffset) {
    ASSERT_EQ(sizeof(llama_structs) / sizeof(llama_structs[0]), 3u);
    for (const auto & s : llama_structs) {
        expect_library_answers(s);
        expect_fields_fill(s);
    }
    EXPECT_EQ(llama_cancel_field_offset("llama_context_params", "cb_eval"),
              static_cast<int64_t>(offsetof(llama_context_params, cb_eval)));
}

#ifdef LLAMA_CANCEL_WITH_MTMD
const struct_entry mtmd_structs[] = { LC_MTMD_STRUCTS };

TEST(Abi, EveryMtmdFieldIsTheCompiledOffset) {
    ASSERT_TRUE(llama_cancel_has_mtmd());
    for (const auto & s : mtmd_structs) {
        expect_library_answers(s);
        expect_fields_fill(s);
    }
    EXPECT_EQ(llama_cancel_field_offset("mtmd_gen_out", "n_feats"),
              static_cast<int64_t>(offsetof(mtmd_gen_out, n_feats)));
}
#else
TEST(Abi, WithoutMtmdNoMtmdStructIsKnown) {
    ASSERT_FALSE(llama_cancel_has_mtmd());
    for (const char * name : { "mtmd_input_text", "mtmd_gen_audio_info", "mtmd_gen_inp", "mtmd_gen_out" }) {
        EXPECT_EQ(llama_cancel_struct_size(name), 0) << name;
        EXPECT_EQ(llama_cancel_field_offset(name, "type"), -1) << name;
    }
}
#endif

TEST(Abi, UnknownNamesAnswerZeroAndMinusOne) {
    EXPECT_EQ(llama_cancel_struct_size("no_such_struct"), 0);
    EXPECT_EQ(llama_cancel_struct_size(nullptr), 0);
    EXPECT_EQ(llama_cancel_field_offset("llama_batch", nullptr), -1);
    EXPECT_EQ(llama_cancel_field_offset(nullptr, "n_tokens"), -1);
}

} // namespace
