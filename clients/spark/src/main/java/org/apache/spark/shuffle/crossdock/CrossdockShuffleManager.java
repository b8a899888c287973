package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.ShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleManager;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.crossdock.client.ConnectionPool;
import org.crossdock.client.CoordinatorClient;
import org.crossdock.client.CrossdockException;
import org.crossdock.client.Placement;
import org.crossdock.client.ReducerHosts;
import org.crossdock.client.SplitRoutes;
import org.crossdock.client.fetch.RunSizes;
import org.crossdock.client.route.RoutePolicy;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.ErrorCode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Spark's {@code spark.shuffle.manager} for Crossdock: a shuffle is pushed to Crossdock workers
 * and read back from them, unless the driver routes it through Spark's own sort shuffle.
 *
 * <p>The route is chosen once per shuffle, when it is registered ({@link RoutePolicy}, with
 * {@code spark.crossdock.route}): a shuffle estimated small ({@link ShuffleInputEstimate}),
 * or into one partition and not large, costs less through Spark's shuffle than through any
 * remote service. A routed shuffle's
 * handle is the sort shuffle manager's own, so executors tell the two kinds apart by the
 * handle, and every call for it is delegated to a {@link SortShuffleManager} held here (its
 * block resolver serves the executor's shuffle files). Such a shuffle's files live on its
 * executors as with vanilla Spark: when an executor is lost, its reducers' fetch failures make
 * Spark recompute the lost maps.
 *
 * <p>On the driver, construction connects to the coordinator (an unreachable coordinator fails
 * the SparkContext at once, naming the address and {@code spark.crossdock.coordinator});
 * {@code registerShuffle} registers the app (lease renewed by a daemon thread every lease/4)
 * and the shuffle, and ships the placement in the handle. {@code unregisterShuffle} and {@code
 * stop} delete the data on the workers. Executors only talk to the coordinator to commit maps.
 */
public class CrossdockShuffleManager implements ShuffleManager {
  private static final Logger LOG = LoggerFactory.getLogger(CrossdockShuffleManager.class);

  private final SparkConf sparkConf;
  private final CrossdockConf conf;
  private final boolean isDriver;
  private final ConnectionPool pool;
  private final CrossdockBlockResolver resolver = new CrossdockBlockResolver();
  private final Set<Integer> registered = ConcurrentHashMap.newKeySet();
  /** Shuffles whose placement the driver refreshed once their map stage completed. */
  private final java.util.Set<Integer> refreshedAfterMaps = ConcurrentHashMap.newKeySet();
  /** Placements refreshed from the coordinator after a failure, by shuffle id. */
  private final Map<Integer, Placement> refreshed = new ConcurrentHashMap<>();
  /** The map output tracker's epoch each shuffle's placement was refreshed at, by shuffle id. */
  private final Map<Integer, Long> refreshedAt = new ConcurrentHashMap<>();
  /** How many run starts the status of each refreshed placement counted, by shuffle id. */
  private final Map<Integer, Long> runCounts = new ConcurrentHashMap<>();
  /** Where each shuffle's split partitions go on, learnt from push answers (executors). */
  private final Map<Integer, SplitRoutes> routes = new ConcurrentHashMap<>();
  private volatile CoordinatorClient coordinator;
  private volatile String appId;
  /** The app's token from the coordinator (the driver) or from a handle (executors). */
  private volatile byte[] appToken;
  /** The app {@link #appToken} belongs to. */
  private volatile String tokenApp;
  private ScheduledExecutorService renewer;
  private volatile boolean stopped;
  /** Spark's own shuffle, for the routed shuffles; created on first use. */
  private volatile SortShuffleManager sort;
  private final Object sortLock = new Object();
  private final AtomicLong throughCrossdock = new AtomicLong();
  private final AtomicLong throughSpark = new AtomicLong();
  private final AtomicLong placedTasks = new AtomicLong();

  public CrossdockShuffleManager(SparkConf sparkConf, boolean isDriver) {
    this.sparkConf = sparkConf;
    this.conf = new CrossdockConf(sparkConf);
    this.isDriver = isDriver;
    org.crossdock.client.Net.useTls(conf.tls);
    this.pool = new ConnectionPool(CrossdockConf.CONNECT_TIMEOUT_MS);
    if (isDriver) {
      installDataIo(sparkConf);
      try {
        coordinator = connect();
      } catch (CrossdockException e) {
        throw unreachable(e);
      }
    }
  }

  /** Spark's property naming the shuffle-data-IO plug-in. */
  static final String DATA_IO = "spark.shuffle.sort.io.plugin.class";

  /**
   * Makes {@link CrossdockShuffleDataIO} the application's shuffle-data-IO plug-in when the
   * user named none, so that enabling Crossdock takes two properties ({@code
   * spark.shuffle.manager} and {@code spark.crossdock.coordinator}). This works because Spark 4
   * creates the driver's shuffle manager (SparkContext: {@code initializeShuffleManager}) before
   * it loads the plug-in from the same configuration object ({@code
   * ShuffleDataIOUtils.loadShuffleDataIO}); executors receive the driver's configuration, this
   * property included. A plug-in the user named is kept: with another one Spark believes shuffle
   * data dies with its executor, so a lost executor's Crossdock map outputs are recomputed
   * (correct, only slower) and dynamic allocation needs shuffle tracking; that is logged.
   */
  static void installDataIo(SparkConf conf) {
    String ours = CrossdockShuffleDataIO.class.getName();
    if (!conf.contains(DATA_IO)) {
      conf.set(DATA_IO, ours);
    } else if (!ours.equals(conf.get(DATA_IO))) {
      LOG.warn("{} is {}, not {}: Spark will treat Crossdock's map outputs as lost with the "
          + "executor that wrote them (recomputed after an executor loss; dynamic allocation "
          + "needs shuffle tracking). Unset it to let Crossdock install its own.",
          DATA_IO, conf.get(DATA_IO), ours);
    }
  }

  public CrossdockShuffleManager(SparkConf sparkConf) {
    this(sparkConf, SparkEnv.get() == null
        || "driver".equals(SparkEnv.get().executorId()));
  }

  private CoordinatorClient connect() throws CrossdockException {
    return new CoordinatorClient(conf.coordinator, CrossdockConf.CONNECT_TIMEOUT_MS,
        conf.networkTimeoutMs, tokenApp, appToken);
  }

  private IllegalStateException unreachable(Exception e) {
    return new IllegalStateException("Crossdock coordinator at " + conf.coordinator
        + " (" + CrossdockConf.COORDINATOR + ") is unreachable: " + e.getMessage()
        + ". Start it (e.g. `crossdock standalone`) or fix " + CrossdockConf.COORDINATOR + ".", e);
  }

  CrossdockConf conf() {
    return conf;
  }

  /** The push connections, proving the app's token of {@code h}. */
  ConnectionPool pool(CrossdockShuffleHandle<?, ?, ?> h) {
    learnToken(h);
    return pool;
  }

  /**
   * On an executor, takes the app's token from the first handle seen: new connections to the
   * coordinator and the workers prove it from then on.
   */
  private void learnToken(CrossdockShuffleHandle<?, ?, ?> h) {
    if (isDriver || (appToken != null && java.util.Arrays.equals(appToken, h.appToken))) {
      return;
    }
    synchronized (this) {
      appToken = h.appToken;
      tokenApp = h.appId;
      pool.authenticateAs(h.appId, h.appToken);
      if (coordinator != null) {
        coordinator.authenticateAs(h.appId, h.appToken);
      }
    }
  }

  /**
   * The placement a task uses: the handle's, unless this executor saw a failure of the shuffle
   * (then the coordinator's current one), or the task is a retry (which asks the coordinator
   * first: the worker that failed its previous attempt may have been replaced).
   */
  Placement placement(CrossdockShuffleHandle<?, ?, ?> h, TaskContext context) throws IOException {
    Placement p = refreshed.get(h.shuffleId());
    if (p == null && context != null
        && (context.attemptNumber() > 0 || context.stageAttemptNumber() > 0)) {
      refreshStatus(h);
      p = refreshed.get(h.shuffleId());
    }
    return p != null ? p : h.placement;
  }

  /**
   * The placement a reduce task reads with: the coordinator's, with the splits of hot
   * partitions (the handle's placement, made at registration, knows none), asked once per
   * executor, shuffle and map output epoch. Splits are made while maps push; Spark runs maps
   * again only after it unregistered outputs, which moves the epoch on. So a placement asked
   * once every map of the shuffle had committed has every split that holds committed data
   * until the epoch moves, and is kept; one asked before (a task of another stage reading the
   * shuffle while some of its maps run again) is used once and asked again by the next task.
   */
  Placement readPlacement(CrossdockShuffleHandle<?, ?, ?> h, TaskContext context)
      throws IOException {
    long epoch = trackerEpoch();
    Long at = refreshedAt.get(h.shuffleId());
    if (at == null || at != epoch) {
      Message.ShuffleStatus s = refreshStatus(h);
      if (s.committedMaps() == s.numMaps()) {
        refreshedAt.put(h.shuffleId(), epoch);
      }
    }
    return placement(h, context);
  }

  private static long trackerEpoch() {
    org.apache.spark.MapOutputTracker t = SparkEnv.get().mapOutputTracker();
    synchronized (t.epochLock()) {
      return t.epoch();
    }
  }

  /** The shuffle's status from the coordinator; its placement is used from now on. */
  Message.ShuffleStatus refreshStatus(CrossdockShuffleHandle<?, ?, ?> h) throws IOException {
    Message.ShuffleStatus s = coordinator(h).shuffleStatus(h.appId, h.shuffleId());
    refreshed.put(h.shuffleId(), Placement.of(s));
    runCounts.put(h.shuffleId(), s.runCount().orElse(0));
    return s;
  }

  /**
   * Where the maps of a merged shuffle began their further sorted runs in partitions {@code
   * [from, to)} and their splits (by partition, map, batch), with the committed attempt of every
   * map in the same answer (the attempt those starts are of): null when there is nothing to ask,
   * as when the status the read placement came from ({@link #readPlacement}) counted no run
   * start because no map spilled.
   */
  Message.ShuffleStatus runStarts(CrossdockShuffleHandle<?, ?, ?> h, int from, int to)
      throws IOException {
    if (!h.spillRuns || runCounts.getOrDefault(h.shuffleId(), 1L) == 0) {
      return null;
    }
    return coordinator(h).shuffleStatus(h.appId, h.shuffleId(), from, to);
  }

  /** What this executor learnt of shuffle {@code shuffleId}'s splits from push answers. */
  SplitRoutes routes(int shuffleId) {
    return routes.computeIfAbsent(shuffleId, id -> new SplitRoutes());
  }

  /**
   * Reports workers that could not be reached (the coordinator checks them at once and moves
   * their partitions if they are gone), then refreshes the placement. Returns the shuffle's
   * current status.
   */
  Message.ShuffleStatus reportAndRefresh(
      CrossdockShuffleHandle<?, ?, ?> h, Collection<String> unreachable) throws IOException {
    for (String addr : unreachable) {
      LOG.warn("Crossdock worker {} is unreachable; reporting it to the coordinator", addr);
      coordinator(h).reportWorkerFailure(addr);
    }
    return refreshStatus(h);
  }

  /** {@link #reportAndRefresh} for a caller already handling a failure: never throws. */
  void workersFailed(CrossdockShuffleHandle<?, ?, ?> h, Collection<String> unreachable) {
    try {
      reportAndRefresh(h, unreachable);
    } catch (IOException | RuntimeException e) {
      LOG.warn("could not report a Crossdock worker failure: {}", e.toString());
    }
  }

  /** The coordinator client for the app of {@code h}, proving its token. */
  CoordinatorClient coordinator(CrossdockShuffleHandle<?, ?, ?> h) throws IOException {
    learnToken(h);
    return coordinator();
  }

  /** The coordinator client, connected on first use on executors. */
  CoordinatorClient coordinator() throws IOException {
    CoordinatorClient c = coordinator;
    if (c == null) {
      synchronized (this) {
        if (coordinator == null) {
          coordinator = connect();
        }
        c = coordinator;
      }
    }
    return c;
  }

  /**
   * The Crossdock app id: {@code spark.app.id}, plus {@code _attempt} when Spark runs app
   * attempts (YARN), plus a random suffix, so no other application or attempt ever reads
   * this one's shuffles of the same ids.
   */
  private synchronized String ensureApp() throws IOException {
    if (appId == null) {
      SparkConf c = SparkEnv.get() != null ? SparkEnv.get().conf() : sparkConf;
      String id = c.get("spark.app.id", null);
      if (id == null) {
        id = sparkConf.getAppId();
      }
      String attempt = c.get("spark.app.attempt.id", "");
      if (!attempt.isEmpty()) {
        id = id + "_" + attempt;
      }
      // spark.app.id is not unique across clusters or restarts (two local-cluster or
      // standalone masters started in the same second both hand out
      // app-<timestamp>-0000, and users may fix the id). A random suffix per driver keeps
      // two applications from ever sharing, or reading, each other's shuffles.
      id = id + "-" + Long.toHexString(new java.security.SecureRandom().nextLong());
      appToken = coordinator().registerApp(id, CrossdockConf.LEASE_MS, conf.appStoredQuota,
          conf.appMemorySharePpm);
      pool.authenticateAs(id, appToken);
      appId = id;
      renewer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "crossdock-lease-renewer");
        t.setDaemon(true);
        return t;
      });
      long every = CrossdockConf.LEASE_MS / 4;
      String app = id;
      renewer.scheduleWithFixedDelay(() -> {
        try {
          coordinator().renewLease(app);
        } catch (Exception e) {
          LOG.warn("Crossdock: renewing the lease of app {} at {} failed: {}", app,
              conf.coordinator, e.toString());
        }
      }, every, every, TimeUnit.MILLISECONDS);
      LOG.info("Crossdock: app {} registered with coordinator {}", id, conf.coordinator);
    }
    return appId;
  }

  @Override
  public <K, V, C> ShuffleHandle registerShuffle(int shuffleId, ShuffleDependency<K, V, C> dep) {
    RoutePolicy.Shuffle estimate = conf.route.mode() == RoutePolicy.Mode.AUTO
        ? ShuffleInputEstimate.of(dep)
        : new RoutePolicy.Shuffle(dep.rdd().getNumPartitions(), dep.partitioner().numPartitions(),
            -1, "not estimated");
    RoutePolicy.Decision route = conf.route.decide(estimate);
    if (!route.crossdock()) {
      throughSpark.incrementAndGet();
      LOG.info("Crossdock: shuffle {} ({} maps, {} partitions) goes through Spark's sort shuffle:"
          + " {}", shuffleId, estimate.maps(), estimate.partitions(), route.reason());
      // The input's sample, if one was being taken, ends here: the maps run without it.
      RangeSample.drop(dep);
      return sort().registerShuffle(shuffleId, dep);
    }
    // Taking the sample ends the sampling: the maps run without it.
    RangeSample sample = RangeSample.of(dep);
    throughCrossdock.incrementAndGet();
    LOG.info("Crossdock: shuffle {} ({} maps, {} partitions) goes through Crossdock: {}",
        shuffleId, estimate.maps(), estimate.partitions(), route.reason());
    return registerWithCrossdock(shuffleId, dep, sample);
  }

  private <K, V, C> ShuffleHandle registerWithCrossdock(int shuffleId,
      ShuffleDependency<K, V, C> dep, RangeSample sample) {
    int numMaps = dep.rdd().getNumPartitions();
    int numPartitions = dep.partitioner().numPartitions();
    try {
      String app = ensureApp();
      Placement placement = null;
      if (numMaps > 0 && numPartitions > 0) {
        placement = registerSampled(app, shuffleId, numMaps, numPartitions, sample);
        registered.add(shuffleId);
      }
      // A key-ordered shuffle without aggregation is pushed as sorted runs and merged by the
      // reader (Hadoop-A's levitated merge); it needs the sorter's writer, not the direct one.
      boolean merge = conf.mergeSortedRuns && dep.keyOrdering().isDefined()
          && dep.aggregator().isEmpty();
      // Maps push their sorter's spills as runs of their own only where the coordinator keeps
      // run starts (its status counts them): one that predates them would let readers merge
      // several runs as one. Batches are then sized for a few runs per map.
      boolean spillRuns = merge && placement != null
          && coordinator().shuffleStatus(app, shuffleId).runCount().isPresent();
      int runBatch = !merge ? 0
          : conf.runBatchBytes((long) numMaps * (spillRuns ? RunSizes.MAX_RUNS_PER_MAP : 1));
      return new CrossdockShuffleHandle<>(shuffleId, dep, conf.coordinator, app, appToken, numMaps,
          placement, !merge && CrossdockDirectWriter.canUse(dep), runBatch, spillRuns,
          CrossdockAccumulators.registered());
    } catch (CrossdockException e) {
      if (e.isTransport()) {
        throw unreachable(e);
      }
      throw new IllegalStateException("Crossdock: registering shuffle " + shuffleId + " ("
          + numMaps + " maps, " + numPartitions + " partitions) failed: " + e.getMessage(), e);
    } catch (IOException e) {
      throw new IllegalStateException("Crossdock: registering shuffle " + shuffleId
          + " failed: " + e.getMessage(), e);
    }
  }

  /**
   * Registers with the sample when there is one. A coordinator that refuses the sample as
   * invalid gets the registration without it: the sample only sharpens a prediction.
   */
  private Placement registerSampled(String app, int shuffleId, int numMaps, int numPartitions,
      RangeSample sample) throws IOException {
    if (sample != null) {
      try {
        Placement placed = coordinator().registerShuffle(app, shuffleId, numMaps, numPartitions,
            sample.inputs(), sample.counts());
        LOG.info("Crossdock: shuffle {} registered with a sample of its {} input partitions"
            + " ({} sampled records)", shuffleId, sample.size(),
            sample.inputs().stream().mapToLong(Message.InputSample::sampled).sum());
        return placed;
      } catch (CrossdockException e) {
        if (e.code() != ErrorCode.INVALID_ARGUMENT) {
          throw e;
        }
        LOG.warn("Crossdock: the coordinator refused shuffle {}'s input sample ({}); registering"
            + " it without", shuffleId, e.getMessage());
      }
    }
    return coordinator().registerShuffle(app, shuffleId, numMaps, numPartitions);
  }

  /** Whether SQL reduce tasks are to prefer their partitions' hosts. */
  public boolean localityEnabled() {
    return conf.locality;
  }

  /**
   * The hosts a reduce task reading partitions {@code [start, end)} of {@code dep} should run on
   * ({@link ReducerHosts}), from the driver's latest placement of the shuffle; empty for a shuffle
   * without maps. Null when the shuffle is not Crossdock's (Spark routed it through its own sort
   * shuffle, or Crossdock is not the shuffle manager): Spark's own preference then applies.
   *
   * <p>Spark asks on its scheduler thread for every task of a reduce stage, so this never calls
   * the coordinator: the SQL extension refreshed the placement when the stage's reads were
   * planned ({@link #refreshAfterMapStage}), and a placement changed since (a worker's loss)
   * costs locality, never correctness (the reader asks the coordinator where data is).
   */
  public static List<String> preferredHosts(ShuffleDependency<?, ?, ?> dep, int start, int end) {
    CrossdockShuffleManager m = managerOf(dep);
    if (m == null) {
      return null;
    }
    Placement p = m.latestPlacement(dep);
    if (p == null) {
      return List.of();
    }
    m.placedTasks.incrementAndGet();
    return ReducerHosts.of(p, start, end);
  }

  /**
   * The driver's latest placement of {@code dep}'s partitions (the one {@link #preferredHosts}
   * answers from), or null when the shuffle is not Crossdock's or has no maps. Read by the SQL
   * rule that splits coalesced reads at hosts' boundaries; never calls the coordinator.
   */
  public static Placement placementOf(ShuffleDependency<?, ?, ?> dep) {
    CrossdockShuffleManager m = managerOf(dep);
    return m == null ? null : m.latestPlacement(dep);
  }

  /**
   * Refreshes the driver's placement of {@code dep} once, after its map stage completed, so that
   * its reduce tasks prefer where each partition's bytes ended up: the coordinator may have
   * continued partitions on other hosts once it predicted their sizes (its re-placement), and
   * hot partitions on other workers (splits). Called by the SQL extension on the adaptive
   * planner's thread when the stage's reads are planned, never on Spark's scheduler thread; so
   * not with adaptive execution off, nor for a final stage when
   * {@code spark.sql.adaptive.applyFinalStageShuffleOptimizations} is off. A failure keeps the
   * placement the driver had (the next planning tries again): it costs locality, not
   * correctness.
   */
  public static void refreshAfterMapStage(ShuffleDependency<?, ?, ?> dep) {
    CrossdockShuffleManager m = managerOf(dep);
    if (m == null || !m.isDriver) {
      return;
    }
    CrossdockShuffleHandle<?, ?, ?> h = (CrossdockShuffleHandle<?, ?, ?>) dep.shuffleHandle();
    if (h.placement == null || !m.refreshedAfterMaps.add(h.shuffleId())) {
      return;
    }
    try {
      m.refreshStatus(h);
    } catch (IOException | RuntimeException e) {
      m.refreshedAfterMaps.remove(h.shuffleId());
      LOG.warn("Could not refresh the placement of shuffle {} after its map stage; its reduce "
          + "tasks prefer the hosts the driver knew of", h.shuffleId(), e);
    }
  }

  /** This process's Crossdock manager when {@code dep} went through it; else null. */
  private static CrossdockShuffleManager managerOf(ShuffleDependency<?, ?, ?> dep) {
    SparkEnv env = SparkEnv.get();
    if (env != null && env.shuffleManager() instanceof CrossdockShuffleManager m
        && dep.shuffleHandle() instanceof CrossdockShuffleHandle<?, ?, ?>) {
      return m;
    }
    return null;
  }

  /** The placement refreshed after a failure, else the handle's (null without maps). */
  private Placement latestPlacement(ShuffleDependency<?, ?, ?> dep) {
    CrossdockShuffleHandle<?, ?, ?> h = (CrossdockShuffleHandle<?, ?, ?>) dep.shuffleHandle();
    return refreshed.getOrDefault(h.shuffleId(), h.placement);
  }

  /**
   * The coordinator's current placement of this driver's shuffle {@code shuffleId} (on the
   * driver, after the shuffle was registered): for tools and tests that check where reduce
   * tasks ran.
   */
  public Placement currentPlacement(int shuffleId) throws IOException {
    String app = appId;
    if (!isDriver || app == null) {
      throw new IllegalStateException("only the driver of an app with shuffles knows placements");
    }
    return Placement.of(coordinator().shuffleStatus(app, shuffleId));
  }

  /** Reduce tasks given their partitions' hosts as preferred locations so far (driver). */
  public long placedTasks() {
    return placedTasks.get();
  }

  /** Shuffles this driver registered through Crossdock so far. */
  public long shufflesThroughCrossdock() {
    return throughCrossdock.get();
  }

  /** Shuffles this driver routed through Spark's sort shuffle so far. */
  public long shufflesThroughSpark() {
    return throughSpark.get();
  }

  /** Spark's sort shuffle manager, for the routed shuffles. */
  private SortShuffleManager sort() {
    SortShuffleManager s = sort;
    if (s == null) {
      synchronized (sortLock) {
        if (sort == null) {
          sort = new SortShuffleManager(sparkConf);
        }
        s = sort;
      }
    }
    return s;
  }

  @SuppressWarnings("unchecked")
  @Override
  public <K, V> ShuffleWriter<K, V> getWriter(ShuffleHandle handle, long mapId,
      TaskContext context, ShuffleWriteMetricsReporter metrics) {
    if (!(handle instanceof CrossdockShuffleHandle)) {
      return sort().getWriter(handle, mapId, context, metrics);
    }
    CrossdockShuffleHandle<K, V, Object> h = (CrossdockShuffleHandle<K, V, Object>) handle;
    if (h.framedBatches) {
      return new CrossdockDirectWriter<>(h, this, mapId, context, metrics);
    }
    return new CrossdockShuffleWriter<>(h, this, mapId, context, metrics);
  }

  @SuppressWarnings("unchecked")
  @Override
  public <K, C> ShuffleReader<K, C> getReader(ShuffleHandle handle, int startMapIndex,
      int endMapIndex, int startPartition, int endPartition, TaskContext context,
      ShuffleReadMetricsReporter metrics) {
    if (!(handle instanceof CrossdockShuffleHandle)) {
      return sort().getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition,
          context, metrics);
    }
    CrossdockShuffleHandle<K, ?, C> h = (CrossdockShuffleHandle<K, ?, C>) handle;
    int end = Math.min(endMapIndex, h.numMaps);
    if (LOG.isDebugEnabled()) {
      LOG.debug("Crossdock reader: shuffle {} maps [{}, {}) partitions [{}, {})", h.shuffleId(),
          startMapIndex, end, startPartition, endPartition);
    }
    return new CrossdockShuffleReader<>(h, this, startMapIndex, end, startPartition, endPartition,
        context, metrics, conf);
  }

  @Override
  public boolean unregisterShuffle(int shuffleId) {
    SortShuffleManager s = sort;
    if (s != null) {
      s.unregisterShuffle(shuffleId);
    }
    refreshed.remove(shuffleId);
    refreshedAfterMaps.remove(shuffleId);
    refreshedAt.remove(shuffleId);
    runCounts.remove(shuffleId);
    routes.remove(shuffleId);
    if (isDriver && appId != null && registered.remove(shuffleId)) {
      try {
        coordinator().unregisterShuffle(appId, shuffleId);
      } catch (CrossdockException e) {
        if (e.code() != ErrorCode.UNKNOWN_SHUFFLE && e.code() != ErrorCode.UNKNOWN_APP) {
          LOG.warn("Crossdock: unregistering shuffle {} failed: {}", shuffleId, e.toString());
        }
      } catch (IOException e) {
        LOG.warn("Crossdock: unregistering shuffle {} failed: {}", shuffleId, e.toString());
      }
    }
    return true;
  }

  @Override
  public ShuffleBlockResolver shuffleBlockResolver() {
    // Routed shuffles' files are served by this executor's block manager through Spark's
    // resolver; when nothing can be routed, nothing is ever served.
    if (conf.route.mode() == RoutePolicy.Mode.CROSSDOCK) {
      return resolver;
    }
    return sort().shuffleBlockResolver();
  }

  @Override
  public synchronized void stop() {
    if (stopped) {
      return;
    }
    stopped = true;
    if (renewer != null) {
      renewer.shutdownNow();
    }
    if (isDriver && appId != null) {
      try {
        coordinator().unregisterApp(appId);
        LOG.info("Crossdock: app {} unregistered", appId);
      } catch (IOException e) {
        LOG.warn("Crossdock: unregistering app {} failed (its lease will expire): {}", appId,
            e.toString());
      }
    }
    if (coordinator != null) {
      coordinator.close();
    }
    pool.close();
    SortShuffleManager s = sort;
    if (s != null) {
      s.stop();
    }
  }
}
