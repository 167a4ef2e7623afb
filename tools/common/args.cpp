#include "args.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace cli_args {

namespace {

std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, sep)) {
        out.push_back(item);
    }
    return out;
}

template <typename T> std::string join(const std::vector<T> & v) {
    std::ostringstream os;
    for (size_t i = 0; i < v.size(); ++i) {
        os << (i ? "," : "") << v[i];
    }
    return os.str();
}

std::string float_text(float v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

} // namespace

parser::parser(std::string synopsis) : synopsis_(std::move(synopsis)) {}

std::string parser::to_int(const char * s, long long lo, long long hi, long long * out) {
    if (*s == 0 || std::isspace(static_cast<unsigned char>(*s))) {
        return "is not a number";
    }
    errno = 0;
    char * end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    if (end == s || *end != 0) {
        return "is not a number";
    }
    if (errno == ERANGE || v < lo || v > hi) {
        return "is out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")";
    }
    *out = v;
    return "";
}

std::string parser::to_float(const char * s, float * out) {
    if (*s == 0 || std::isspace(static_cast<unsigned char>(*s))) {
        return "is not a number";
    }
    errno = 0;
    char * end = nullptr;
    const float v = std::strtof(s, &end);
    if (end == s || *end != 0 || std::isnan(v)) {
        return "is not a number";
    }
    if (errno == ERANGE || std::isinf(v)) {
        return "is out of range";
    }
    *out = v;
    return "";
}

parser & parser::add(const char * names, const char * metavar, const char * help, std::string default_text,
                     std::function<std::string(const char *)> set) {
    opts_.push_back({split(names, '|'), metavar != nullptr ? metavar : "", help, std::move(default_text), std::move(set)});
    return *this;
}

parser & parser::option(const char * names, std::string * target, const char * metavar, const char * help) {
    return add(names, metavar, help, *target, [target](const char * v) {
        *target = v;
        return std::string();
    });
}

parser & parser::option(const char * names, int * target, const char * metavar, const char * help) {
    return add(names, metavar, help, std::to_string(*target), [target](const char * v) {
        long long x = 0;
        std::string err = to_int(v, INT_MIN, INT_MAX, &x);
        if (err.empty()) {
            *target = static_cast<int>(x);
        }
        return err;
    });
}

parser & parser::option(const char * names, uint32_t * target, const char * metavar, const char * help) {
    return add(names, metavar, help, std::to_string(*target), [target](const char * v) {
        long long x = 0;
        std::string err = to_int(v, 0, UINT32_MAX, &x);
        if (err.empty()) {
            *target = static_cast<uint32_t>(x);
        }
        return err;
    });
}

parser & parser::option(const char * names, float * target, const char * metavar, const char * help) {
    return add(names, metavar, help, float_text(*target), [target](const char * v) { return to_float(v, target); });
}

parser & parser::option(const char * names, std::vector<int> * target, const char * metavar, const char * help) {
    return add(names, metavar, help, join(*target), [target](const char * v) {
        std::vector<int> out;
        for (const std::string & item : split(v, ',')) {
            long long x = 0;
            const std::string err = to_int(item.c_str(), INT_MIN, INT_MAX, &x);
            if (!err.empty()) {
                return "item '" + item + "' " + err;
            }
            out.push_back(static_cast<int>(x));
        }
        *target = out;
        return std::string();
    });
}

parser & parser::option(const char * names, std::vector<std::string> * target, const char * metavar,
                        const char * help) {
    return add(names, metavar, help, target->empty() ? "none" : join(*target), [target](const char * v) {
        target->clear();
        for (const std::string & item : split(v, ',')) {
            if (!item.empty() && item != "none") {
                target->push_back(item);
            }
        }
        return std::string();
    });
}

parser & parser::option(const char * names, std::function<std::string(const char *)> convert, const char * metavar,
                        const char * help, std::string default_text) {
    return add(names, metavar, help, std::move(default_text), std::move(convert));
}

parser & parser::flag(const char * names, bool * target, bool value, const char * help) {
    return add(names, nullptr, help, "", [target, value](const char *) {
        *target = value;
        return std::string();
    });
}

parser & parser::positional(const char * metavar, std::string * target, const char * help) {
    pos_.push_back({metavar, help, target});
    return *this;
}

const parser::opt * parser::find(const std::string & name) const {
    for (const opt & o : opts_) {
        for (const std::string & n : o.names) {
            if (n == name) {
                return &o;
            }
        }
    }
    return nullptr;
}

int parser::fail(const std::string & message) const {
    std::fprintf(stderr, "error: %s\n\n", message.c_str());
    print_usage(stderr);
    return 2;
}

int parser::check(std::initializer_list<problem> problems) const {
    for (const problem & p : problems) {
        if (p.found) {
            return fail(p.message);
        }
    }
    return -1;
}

int parser::parse(int argc, char ** argv) {
    size_t n_pos = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            print_usage(stdout);
            return 0;
        }
        if (a.size() < 2 || a[0] != '-') {
            if (n_pos >= pos_.size()) {
                return fail("unexpected argument " + a);
            }
            *pos_[n_pos++].target = a;
            continue;
        }
        const opt * o = find(a);
        if (o == nullptr) {
            return fail("unknown option " + a);
        }
        const char * value = nullptr;
        if (!o->metavar.empty()) {
            if (i + 1 >= argc) {
                return fail(a + " needs a value (" + o->metavar + ")");
            }
            value = argv[++i];
        }
        const std::string err = o->set(value);
        if (!err.empty()) {
            return fail(a + ": '" + value + "' " + err);
        }
    }
    return -1;
}

void parser::print_usage(std::FILE * out) const {
    std::fputs(synopsis_.c_str(), out);
    if (!pos_.empty() || !opts_.empty()) {
        std::fputs("\n", out);
    }
    for (const pos & p : pos_) {
        std::fprintf(out, "  %-26s %s\n", p.metavar.c_str(), p.help.c_str());
    }
    for (const opt & o : opts_) {
        std::string head;
        for (size_t k = 0; k < o.names.size(); ++k) {
            head += (k ? ", " : "") + o.names[k];
        }
        if (!o.metavar.empty()) {
            head += " " + o.metavar;
        }
        std::string help = o.help;
        if (!o.metavar.empty() && !o.default_text.empty()) {
            help += " (default: " + o.default_text + ")";
        }
        std::fprintf(out, "  %-26s %s\n", head.c_str(), help.c_str());
    }
    std::fprintf(out, "  %-26s %s\n", "--help, -h", "this text");
}

} // namespace cli_args
