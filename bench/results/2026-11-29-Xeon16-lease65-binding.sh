#!/bin/sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_plm=isolated
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node|L1d|L2|L3'
cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null
d=ex/mlp-4-vanilla
sh scripts/build-model.sh build $d examples/mlp.cf -D B=2 -D S=1024 -D D=512 --backward -D tp=4 --schedule=vanilla > $d.log 2>&1 || cat $d.log
for i in 1 2 3 4; do
  for b in default core hwthread; do
    case $b in default) a= ;; core) a="--bind-to core --map-by core" ;; hwthread) a="--bind-to hwthread --map-by hwthread" ;; esac
    echo "$b $i $(mpirun --allow-run-as-root --timeout 60 $a -n 4 $d/run --iters 15 --warmup 2 | tr ' ' '\n' | grep -E '^(span_ms|backward_span_ms)=' | tr '\n' ' ')"
  done
done
