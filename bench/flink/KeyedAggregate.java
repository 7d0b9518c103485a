// The Flink anchor of bench/state_bench.py: the state benchmark's keyed running aggregate
// (count, sum, a 64-character payload: ~100 bytes per key) in Flink's own ValueState, on
// the RocksDB backend with incremental checkpoints. Each source subtask s emits records
// g = c * parallelism + s: the first `keys` records fill the state (key g), the rest draw
// a key from all keys or from the hot 1 %, throttled to `rate` records/s so that one
// checkpoint interval covers one epoch of the sparkpoint bench. Compiled with javac at
// bench time against the Flink distribution the bench installs.
package sparkpointbench;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

public final class KeyedAggregate {
    public static void main(String[] args) throws Exception {
        long keys = Long.parseLong(args[0]);
        boolean hot = Boolean.parseBoolean(args[1]);
        String checkpointDir = args[2];
        int parallelism = Integer.parseInt(args[3]);
        long steadyRecords = Long.parseLong(args[4]);
        long rate = Long.parseLong(args[5]);
        long intervalMs = Long.parseLong(args[6]);

        Configuration conf = new Configuration();
        conf.setString("state.backend.type", "rocksdb");
        conf.setString("execution.checkpointing.incremental", "true");
        conf.setString("execution.checkpointing.dir", checkpointDir);
        conf.setString("execution.checkpointing.interval", intervalMs + " ms");
        conf.setString("execution.checkpointing.num-retained", "1000");
        conf.setString("taskmanager.memory.managed.size", "512m");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);

        TypeInformation<Tuple2<Long, Long>> type = Types.TUPLE(Types.LONG, Types.LONG);
        DataGeneratorSource<Tuple2<Long, Long>> source = new DataGeneratorSource<>(
                new Records(keys, hot, rate), keys + steadyRecords, type);
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "records")
                .keyBy(record -> record.f0)
                .process(new Aggregate())
                .sinkTo(new DiscardingSink<>());
        env.execute("sparkpoint-state-bench");
    }

    static long mix(long x) {  // splitmix64's finaliser, as the sparkpoint bench's source
        x += 0x9E3779B97F4A7C15L;
        x = (x ^ (x >>> 30)) * 0xBF58476D1CE4E5B9L;
        x = (x ^ (x >>> 27)) * 0x94D049BB133111EBL;
        return x ^ (x >>> 31);
    }

    /** Fill, then throttled draws; prints FILLED <epoch ms> once its subtask is past the fill. */
    static final class Records implements GeneratorFunction<Long, Tuple2<Long, Long>> {
        private final long keys;
        private final boolean hot;
        private final long rate;
        private transient int subtask;
        private transient int parallelism;
        private transient long count;
        private transient long steadySince;
        private transient long steadyCount;

        Records(long keys, boolean hot, long rate) {
            this.keys = keys;
            this.hot = hot;
            this.rate = rate;
        }

        @Override
        public void open(SourceReaderContext context) {
            subtask = context.getIndexOfSubtask();
            parallelism = context.currentParallelism();
        }

        @Override
        public Tuple2<Long, Long> map(Long ignored) throws Exception {
            long g = count++ * parallelism + subtask;
            long x = mix(g);
            if (g < keys) {
                return Tuple2.of(g, x & 0xFFFF);
            }
            if (steadySince == 0) {
                steadySince = System.currentTimeMillis();
                System.out.println("FILLED " + steadySince + " " + subtask + "/" + parallelism + " " + count);
                System.out.flush();
            }
            // Hold this subtask to rate / parallelism records per second.
            long due = steadySince + (steadyCount++ * 1000L * parallelism) / rate;
            long wait = due - System.currentTimeMillis();
            if (wait > 0) {
                Thread.sleep(wait);
            }
            long space = hot ? Math.max(1, keys / 100) : keys;
            return Tuple2.of(Long.remainderUnsigned(x, space), x & 0xFFFF);
        }
    }

    /** Per key: count, sum and a 64-character payload, in keyed ValueState. */
    static final class Aggregate
            extends KeyedProcessFunction<Long, Tuple2<Long, Long>, Long> {
        private transient ValueState<Tuple3<Long, Long, String>> total;

        @Override
        public void open(OpenContext context) {
            total = getRuntimeContext().getState(new ValueStateDescriptor<>(
                    "total", Types.TUPLE(Types.LONG, Types.LONG, Types.STRING)));
        }

        @Override
        public void processElement(Tuple2<Long, Long> record, Context context,
                Collector<Long> out) throws Exception {
            Tuple3<Long, Long, String> found = total.value();
            long count = found == null ? 1 : found.f0 + 1;
            long sum = (found == null ? 0 : found.f1) + record.f1;
            total.update(Tuple3.of(count, sum, String.format("%064d", record.f0)));
        }
    }
}
