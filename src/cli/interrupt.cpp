// Ctrl-C: the command ends at once, saying what it was doing and what it had
// completed (commands.hpp: progress_step).
//
// The handler may only call async-signal-safe functions: it formats the
// line by hand from text the main thread published beforehand (two slots
// each, swapped by an atomic index, so the handler never reads a slot being
// written) and leaves with _exit.

#include "commands.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace spool::cli {
namespace {

constexpr size_t kSlot = 4096;

// A text the handler can read while the main thread replaces it.
struct Published {
  char slots[2][kSlot] = {};
  size_t lengths[2] = {0, 0};
  std::atomic<int> current{0};

  void set(std::string_view text) {
    const int next = 1 - current.load(std::memory_order_relaxed);
    const size_t n = std::min(text.size(), kSlot);
    if (n > 0) std::memcpy(slots[next], text.data(), n);  // an empty view may hold no pointer
    lengths[next] = n;
    current.store(next, std::memory_order_release);
  }
  std::string_view get() const {
    const int c = current.load(std::memory_order_acquire);
    return {slots[c], lengths[c]};
  }
};

Published g_step, g_done, g_detail;
std::string g_done_text;  // main thread only
timespec g_start{};
timespec g_step_start{};

double seconds_since(const timespec& from) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec - from.tv_sec) + static_cast<double>(now.tv_nsec - from.tv_nsec) * 1e-9;
}

// Appends `text`, then `seconds` with one decimal, to `out` (signal-safe).
void append(char* out, size_t& n, size_t cap, std::string_view text) {
  for (const char c : text)
    if (n < cap) out[n++] = c;
}
void append_seconds(char* out, size_t& n, size_t cap, double seconds) {
  const long tenths = static_cast<long>(seconds * 10.0 + 0.5);
  char digits[24];
  size_t d = 0;
  long whole = tenths / 10;
  do {
    digits[d++] = static_cast<char>('0' + whole % 10);
    whole /= 10;
  } while (whole > 0 && d < sizeof(digits));
  while (d > 0) append(out, n, cap, std::string_view(&digits[--d], 1));
  const char frac[3] = {'.', static_cast<char>('0' + tenths % 10), 's'};
  append(out, n, cap, std::string_view(frac, 3));
}

extern "C" void on_interrupt(int) {
  static char line[3 * kSlot];
  size_t n = 0;
  const size_t cap = sizeof(line);
  append(line, n, cap, "\nspool: interrupted (Ctrl-C) after ");
  append_seconds(line, n, cap, seconds_since(g_start));
  const std::string_view step = g_step.get();
  if (!step.empty()) {
    append(line, n, cap, " during: ");
    append(line, n, cap, step);
    append(line, n, cap, " (for ");
    append_seconds(line, n, cap, seconds_since(g_step_start));
    append(line, n, cap, ")");
    const std::string_view detail = g_detail.get();
    if (!detail.empty()) {
      append(line, n, cap, ", at ");
      append(line, n, cap, detail);
    }
  }
  const std::string_view done = g_done.get();
  append(line, n, cap, "; completed: ");
  append(line, n, cap, done.empty() ? std::string_view("nothing yet") : done);
  append(line, n, cap, "\n");
  ssize_t ignored = write(STDERR_FILENO, line, n);
  (void)ignored;
  _exit(130);
}

}  // namespace

void install_interrupt_handler() {
  clock_gettime(CLOCK_MONOTONIC, &g_start);
  g_step_start = g_start;
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

void progress_step(std::string_view what) {
  const std::string_view previous = g_step.get();
  if (!previous.empty()) {
    // The step that just ended, with its time, joins the completed ones.
    char line[kSlot];
    size_t n = 0;
    append(line, n, sizeof(line), previous);
    append(line, n, sizeof(line), " (");
    append_seconds(line, n, sizeof(line), seconds_since(g_step_start));
    append(line, n, sizeof(line), ")");
    if (!g_done_text.empty()) g_done_text += "; ";
    g_done_text.append(line, n);
    g_done.set(g_done_text);
  }
  clock_gettime(CLOCK_MONOTONIC, &g_step_start);
  g_detail.set({});
  g_step.set(what);
}

void progress_detail(std::string_view where) { g_detail.set(where); }

}  // namespace spool::cli
