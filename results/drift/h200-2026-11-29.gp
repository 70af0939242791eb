# pav drift: ||delta||/||ref|| against the split ceiling, per cell (gnuplot results/drift/h200-2026-11-29.gp)
set terminal pngcairo noenhanced size 1120,480 font ",10"
set output "results/drift/h200-2026-11-29.png"
set logscale x 2
set grid
set key below center horizontal maxrows 5 font ",8" spacing 0.9
set xrange [5.333333333333333:384]
set ylabel "||delta|| / ||ref|| (%)"
set multiplot layout 1,2 title "pav drift: full (gpu, 8 seeds): ||delta||/||ref|| against the split ceiling (max_partitions); mean over seeds, bars min-max"
set title "kernel reference (dequantized cache)"
plot "results/drift/h200-2026-11-29.dat" index 0 using 1:2:3:4 with yerrorlines title "120k/b1 bf16", \
     "results/drift/h200-2026-11-29.dat" index 1 using 1:2:3:4 with yerrorlines title "120k/b1 f32", \
     "results/drift/h200-2026-11-29.dat" index 2 using 1:2:3:4 with yerrorlines title "120k/b8 bf16", \
     "results/drift/h200-2026-11-29.dat" index 3 using 1:2:3:4 with yerrorlines title "120k/b8 f32", \
     "results/drift/h200-2026-11-29.dat" index 4 using 1:2:3:4 with yerrorlines title "120k/b24 bf16", \
     "results/drift/h200-2026-11-29.dat" index 5 using 1:2:3:4 with yerrorlines title "120k/b24 f32", \
     "results/drift/h200-2026-11-29.dat" index 6 using 1:2:3:4 with yerrorlines title "334k/b1 bf16", \
     "results/drift/h200-2026-11-29.dat" index 7 using 1:2:3:4 with yerrorlines title "334k/b1 f32", \
     "results/drift/h200-2026-11-29.dat" index 8 using 1:2:3:4 with yerrorlines title "334k/b8 bf16", \
     "results/drift/h200-2026-11-29.dat" index 9 using 1:2:3:4 with yerrorlines title "334k/b8 f32", \
     "results/drift/h200-2026-11-29.dat" index 10 using 1:2:3:4 with yerrorlines title "334k/b24 bf16", \
     "results/drift/h200-2026-11-29.dat" index 11 using 1:2:3:4 with yerrorlines title "334k/b24 f32", \
     "results/drift/h200-2026-11-29.dat" index 12 using 1:2:3:4 with yerrorlines title "764k/b1 bf16", \
     "results/drift/h200-2026-11-29.dat" index 13 using 1:2:3:4 with yerrorlines title "764k/b1 f32", \
     "results/drift/h200-2026-11-29.dat" index 14 using 1:2:3:4 with yerrorlines title "764k/b8 bf16", \
     "results/drift/h200-2026-11-29.dat" index 15 using 1:2:3:4 with yerrorlines title "764k/b8 f32", \
     "results/drift/h200-2026-11-29.dat" index 16 using 1:2:3:4 with yerrorlines title "764k/b24 bf16", \
     "results/drift/h200-2026-11-29.dat" index 17 using 1:2:3:4 with yerrorlines title "764k/b24 f32"
set title "end to end (unquantized source)"
plot "results/drift/h200-2026-11-29.dat" index 18 using 1:2:3:4 with yerrorlines title "120k/b1 bf16", \
     "results/drift/h200-2026-11-29.dat" index 19 using 1:2:3:4 with yerrorlines title "120k/b1 f32", \
     "results/drift/h200-2026-11-29.dat" index 20 using 1:2:3:4 with yerrorlines title "120k/b8 bf16", \
     "results/drift/h200-2026-11-29.dat" index 21 using 1:2:3:4 with yerrorlines title "120k/b8 f32", \
     "results/drift/h200-2026-11-29.dat" index 22 using 1:2:3:4 with yerrorlines title "120k/b24 bf16", \
     "results/drift/h200-2026-11-29.dat" index 23 using 1:2:3:4 with yerrorlines title "120k/b24 f32", \
     "results/drift/h200-2026-11-29.dat" index 24 using 1:2:3:4 with yerrorlines title "334k/b1 bf16", \
     "results/drift/h200-2026-11-29.dat" index 25 using 1:2:3:4 with yerrorlines title "334k/b1 f32", \
     "results/drift/h200-2026-11-29.dat" index 26 using 1:2:3:4 with yerrorlines title "334k/b8 bf16", \
     "results/drift/h200-2026-11-29.dat" index 27 using 1:2:3:4 with yerrorlines title "334k/b8 f32", \
     "results/drift/h200-2026-11-29.dat" index 28 using 1:2:3:4 with yerrorlines title "334k/b24 bf16", \
     "results/drift/h200-2026-11-29.dat" index 29 using 1:2:3:4 with yerrorlines title "334k/b24 f32", \
     "results/drift/h200-2026-11-29.dat" index 30 using 1:2:3:4 with yerrorlines title "764k/b1 bf16", \
     "results/drift/h200-2026-11-29.dat" index 31 using 1:2:3:4 with yerrorlines title "764k/b1 f32", \
     "results/drift/h200-2026-11-29.dat" index 32 using 1:2:3:4 with yerrorlines title "764k/b8 bf16", \
     "results/drift/h200-2026-11-29.dat" index 33 using 1:2:3:4 with yerrorlines title "764k/b8 f32", \
     "results/drift/h200-2026-11-29.dat" index 34 using 1:2:3:4 with yerrorlines title "764k/b24 bf16", \
     "results/drift/h200-2026-11-29.dat" index 35 using 1:2:3:4 with yerrorlines title "764k/b24 f32"
unset multiplot
