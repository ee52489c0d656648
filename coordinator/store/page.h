#pragma once
// Pages of a list, cut by key (keyset paging, never OFFSET): a page holds up
// to `limit` items in the list's fixed order, and the token of the page after
// it, set exactly when more items follow. A token is the key of the page's
// last item, prefixed with the list's name ("o:1234" for outcomes by seq), so
// a token from another list is refused rather than misread. Header-only: the
// triage store uses it too.

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace leapfrog::coord {

// A page token that does not parse, or belongs to another list: the
// caller's mistake (INVALID_ARGUMENT, HTTP 400).
class BadPageToken : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

template <class T>
struct Page {
  std::vector<T> items;
  std::string next_page_token;  // "" when no item follows
};

// Adds `item` to `page` unless that takes the page past `max_bytes`
// serialized (common/bounds.h's kMaxPageBytes): false when it does not fit,
// and the page ends before it. An empty page takes any item, so a page
// always moves the list on. `bytes` is the page's size so far.
template <class T>
bool add_within_bytes(Page<T>& page, T item, size_t& bytes, size_t max_bytes) {
  const size_t size = item.ByteSizeLong() + 8;  // the field's tag and length, then the item
  if (!page.items.empty() && bytes + size > max_bytes) return false;
  bytes += size;
  page.items.push_back(std::move(item));
  return true;
}

// Limits of one list: what 0 means, and the most one page holds.
struct PageLimits {
  uint32_t fallback;
  uint32_t max;
  uint32_t resolve(uint32_t asked) const { return asked == 0 ? fallback : std::min(asked, max); }
};

// "<list>:<k1>.<k2>..." of a key.
inline std::string make_page_token(const std::string& list, const std::vector<int64_t>& key) {
  std::string out = list + ":";
  for (size_t i = 0; i < key.size(); ++i) out += (i ? "." : "") + std::to_string(key[i]);
  return out;
}

// A page of `rows`, read with one row more than `limit`: at most `limit`
// items and at most `max_bytes` serialized (add_within_bytes). When rows
// are left over, the token is token(last, i): the last item kept and its
// index in `rows` (for a key the row had and the item does not carry).
template <class T, class Token>
Page<T> cut_page(std::vector<T> rows, uint32_t limit, size_t max_bytes, const Token& token) {
  Page<T> page;
  size_t bytes = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == limit || !add_within_bytes(page, std::move(rows[i]), bytes, max_bytes)) {
      page.next_page_token = token(page.items.back(), i - 1);
      break;
    }
  }
  return page;
}

// The key of a token of `list` with `parts` numbers; empty for an empty
// token (the first page). Throws BadPageToken.
inline std::vector<int64_t> parse_page_token(const std::string& list, size_t parts,
                                             const std::string& token) {
  if (token.empty()) return {};
  auto bad = [&] {
    return BadPageToken("bad page token \"" + token.substr(0, 64) + "\" for the " + list +
                        " list: pass the next_page_token of its previous page");
  };
  if (token.compare(0, list.size() + 1, list + ":") != 0) throw bad();
  std::vector<int64_t> key;
  const char* p = token.data() + list.size() + 1;
  const char* const end = token.data() + token.size();
  while (key.size() < parts) {
    int64_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || next == p) throw bad();
    key.push_back(v);
    p = next;
    if (key.size() < parts) {
      if (p == end || *p != '.') throw bad();
      ++p;
    }
  }
  if (p != end) throw bad();
  return key;
}

// A key that ends in a text (agents by name, kernels by time and label): the
// numbers as above, then the text in hex, so that no byte of it can be
// mistaken for a separator: "<list>:<k1>.<hex>", or "<list>:<hex>".
inline std::string make_page_token(const std::string& list, const std::vector<int64_t>& key,
                                   const std::string& text) {
  static const char digits[] = "0123456789abcdef";
  std::string out = key.empty() ? list + ":" : make_page_token(list, key) + ".";
  for (unsigned char c : text) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// A key of `parts` numbers and a text, from such a token.
struct TextPageKey {
  std::vector<int64_t> numbers;
  std::string text;
};

// The key of a token of `list` with `parts` numbers and a text; nullopt for
// an empty token (the first page). Throws BadPageToken.
inline std::optional<TextPageKey> parse_text_page_token(const std::string& list, size_t parts,
                                                        const std::string& token) {
  if (token.empty()) return std::nullopt;
  auto bad = [&] {
    return BadPageToken("bad page token \"" + token.substr(0, 64) + "\" for the " + list +
                        " list: pass the next_page_token of its previous page");
  };
  if (token.compare(0, list.size() + 1, list + ":") != 0) throw bad();
  const std::string rest = token.substr(list.size() + 1);
  TextPageKey key;
  std::string hex = rest;
  if (parts > 0) {
    const size_t dot = rest.rfind('.');
    if (dot == std::string::npos) throw bad();
    key.numbers = parse_page_token(list, parts, list + ":" + rest.substr(0, dot));
    hex = rest.substr(dot + 1);
  }
  if (hex.size() % 2) throw bad();
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw bad();
  };
  for (size_t i = 0; i < hex.size(); i += 2)
    key.text += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
  return key;
}

}  // namespace leapfrog::coord
