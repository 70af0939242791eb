// SPDX-License-Identifier: Apache-2.0
#include "stats/bootstrap.hpp"

#include "stats/percentile.hpp"

#include <climits>
#include <stdexcept>
#include <string>

namespace pav::stats {

std::uint64_t draw_index(std::mt19937_64& rng, std::uint64_t n) {
  using U128 = unsigned __int128;
  U128 m = static_cast<U128>(rng()) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    while (low < threshold) {
      m = static_cast<U128>(rng()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

std::int64_t bootstrap_draws(std::size_t na, std::size_t nb, int resamples) {
  // Both sizes are bounded by the memory that holds them, resamples by int:
  // the product of at most 2^31 and 2^61 is computed in 128 bits.
  const __int128 draws = static_cast<__int128>(resamples) * (static_cast<__int128>(na) + static_cast<__int128>(nb));
  return draws > INT64_MAX ? INT64_MAX : static_cast<std::int64_t>(draws);
}

namespace {

void resample(std::span<const double> from, std::vector<double>& into, std::mt19937_64& rng) {
  into.resize(from.size());
  for (auto& x : into) x = from[draw_index(rng, from.size())];
}

}  // namespace

std::vector<Interval> bootstrap_relative_delta(std::span<const double> a, std::span<const double> b,
                                               const SampleStats& stats, const BootstrapOptions& options) {
  if (a.empty() || b.empty()) throw std::invalid_argument("bootstrap: empty sample");
  if (options.resamples < 1) throw std::invalid_argument("bootstrap: resamples must be >= 1");
  if (const std::int64_t draws = bootstrap_draws(a.size(), b.size(), options.resamples); draws > kMaxBootstrapDraws)
    throw std::invalid_argument("bootstrap: " + std::to_string(draws) + " draws, more than the limit of " +
                                std::to_string(kMaxBootstrapDraws));
  if (!(options.confidence > 0.0 && options.confidence < 1.0))
    throw std::invalid_argument("bootstrap: confidence must lie strictly between 0 and 1");
  std::mt19937_64 rng(options.seed);
  std::vector<double> sample_a;
  std::vector<double> sample_b;
  std::vector<std::vector<double>> deltas;
  for (int r = 0; r < options.resamples; ++r) {
    resample(a, sample_a, rng);
    resample(b, sample_b, rng);
    const auto sa = stats(sample_a);
    const auto sb = stats(sample_b);
    if (sa.size() != sb.size()) throw std::logic_error("bootstrap: statistics differ in count");
    deltas.resize(sa.size());
    for (std::size_t k = 0; k < sa.size(); ++k) deltas[k].push_back(sb[k] / sa[k] - 1.0);
  }
  const double tail = (1.0 - options.confidence) / 2.0;
  std::vector<Interval> out;
  for (auto& d : deltas) out.push_back({percentile(d, tail), percentile(d, 1.0 - tail)});
  return out;
}

}  // namespace pav::stats
