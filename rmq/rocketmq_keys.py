"""The keys RocketMQ's servers read from their properties files, and how rmq reports the
keys of a file that it does not act on.

RocketMQ sets every key that names a setter of its config objects (MixAll.properties2Object)
and passes over any other key in silence, a typo included. The sets below are those setters'
names in RocketMQ 4.9.8 and 5.3 (BrokerConfig with BrokerIdentity, NettyServerConfig,
NettyClientConfig, MessageStoreConfig and AuthConfig for the broker; NamesrvConfig and the
Netty configs for the name server; ControllerConfig and JraftConfig for the controller), plus
the few keys their start-up code reads itself. They are facts about RocketMQ, not settings of
rmq: a key rmq acts on is in its own config class, whatever these sets hold.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Collection, Iterable

# mqbroker: the config objects' setters; rmqAddressServerDomain and rmqAddressServerSubGroup
# (BrokerStartup.properties2SystemEnv); brokerConfigPaths (mqbrokercontainer's list of brokers).
BROKER = frozenset(
    """
    accessMessageInMemoryHotRatio accessMessageInMemoryMaxRatio accountStatsEnable
    accountStatsPrintZeroValues ackMessageThreadPoolNums ackThreadPoolQueueCapacity
    aclCacheExpiredSecond aclCacheMaxNum aclCacheRefreshSecond aclEnable
    adminBrokerThreadPoolNums adminBrokerThreadPoolQueueCapacity allAckInSyncStateSet
    allowRecallWhenBrokerNotWriteable appendAckAsync appendCkAsync asyncLearner asyncSendEnable
    authConfigPath authenticationEnabled authenticationMetadataProvider authenticationProvider
    authenticationStrategy authenticationWhitelist authorizationEnabled
    authorizationMetadataProvider authorizationProvider authorizationStrategy
    authorizationWhitelist autoCreateSubscriptionGroup autoCreateTopicEnable
    autoDeleteUnusedStats autoMessageVersionOnTopicLen batchDispatchRequestThreadPoolNums
    bindAddress bitMapLengthConsumeQueueExt bottomMostCompressionTypeForConsumeQueueStore
    broadcastOffsetExpireMaxSecond broadcastOffsetExpireSecond brokerClusterName
    brokerConfigPath brokerConfigPaths brokerElectionPriority brokerFastFailureEnable
    brokerHeartbeatInterval brokerIP1 brokerIP2 brokerId brokerName brokerNotActiveTimeoutMillis
    brokerPermission brokerRole brokerTopicEnable cgColdReadThreshold channelExpiredTimeout
    channelNotActiveInterval checkCRCOnRecover checkSyncStateSetPeriod cleanFileForciblyEnable
    cleanOfflineBrokerInterval cleanResourceInterval cleanRocksDBDirtyCQIntervalMin
    cleanSwapedMapInterval clearRetryTopicWhenDeleteTopic clientAsyncSemaphoreValue
    clientCallbackExecutorThreads clientChannelMaxIdleTimeSeconds clientCloseSocketIfTimeout
    clientManageThreadPoolNums clientManagerThreadPoolQueueCapacity clientOnewaySemaphoreValue
    clientPooledByteBufAllocatorEnable clientSocketRcvBufSize clientSocketSndBufSize
    clientWorkerThreads clusterName clusterTopicEnable coldCtrStrategyEnable
    coldDataFlowControlEnable coldDataScanEnable commercialBaseCount commercialBigCount
    commercialEnable commercialSizePerMsg commercialTimerCount commercialTransCount
    commitCommitLogLeastPages commitCommitLogThoroughInterval commitIntervalCommitLog
    commitLogForceSwapMapInterval commitLogSwapMapInterval commitLogSwapMapReserveFileNum
    compactionCqMappedFileSize compactionMappedFileSize compactionScheduleInternal
    compactionThreadNum compatibleWithOldNameSrv compressedRegister configBlackList
    configManagerVersion configName connectTimeoutMillis consumerFallbehindThreshold
    consumerManageThreadPoolNums consumerManagerThreadPoolQueueCapacity
    consumerOffsetUpdateVersionStep controllerAddr controllerHeartBeatTimeoutMills
    correctLogicMinOffsetForceInterval correctLogicMinOffsetSleepInterval dLegerGroup
    dLegerPeers dLegerSelfId dataReadAheadEnable debugLockEnable defaultMessageRequestMode
    defaultPopShareQueueNum defaultQueryMaxNum defaultTopicQueueNums
    delayOffsetUpdateVersionStep deleteCommitLogFilesInterval deleteConsumeQueueFilesInterval
    deleteFileBatchMax deleteWhen destroyMapedFileIntervalForcibly disableCallbackExecutor
    disableConsumeIfConsumerReadSlowly disableNettyWorkerGroup disappearTimeAfterStart
    diskFallRecorded diskMaxUsedSpaceRatio diskSpaceCleanForciblyRatio
    diskSpaceWarningLevelRatio dispatchCqCacheNum dispatchCqThreads dispatchFromSenderThread
    duplicationEnable enableAsyncReput enableAutoInSyncReplicas enableBatchPush
    enableBroadcastOffsetStore enableBuildConsumeQueueConcurrently enableCalcFilterBitMap
    enableCleanExpiredOffset enableCompaction enableConsumeQueueExt enableControllerMode
    enableCreateSysGroup enableDLegerCommitLog enableDetailStat enableFastChannelEventProcess
    enableLmq enableLmqStats enableMixedMessageType enableMultiDispatch enableNetWorkFlowControl
    enableNotifyAfterPopOrderLockRelease enableNotifyBeforePopCalculateLag enablePopBatchAck
    enablePopBufferMerge enablePopLog enablePopMessageThreshold enablePropertyFilter
    enableReconnectForGoAway enableRegisterProducer enableRemoteEscape enableRetryTopicV2
    enableRocksDBLog enableScheduleAsyncDeliver enableScheduleMessageStats
    enableShutdownGracefully enableSingleTopicRegister enableSkipLongAwaitingAck
    enableSlaveActingMaster enableSplitRegistration enabledAppendPropCRC
    endTransactionPoolQueueCapacity endTransactionThreadPoolNums estimateAccumulation
    expectConsumerNumUseFilter fastFailIfNoBufferInStorePool fetchControllerAddrByDnsLookup
    fetchNameSrvAddrByDnsLookup fetchNamesrvAddrByAddressServer fetchNamesrvAddrInterval
    fileReservedTime filterDataCleanTimeSpan filterServerNums filterSupportRetry
    flushCommitLogLeastPages flushCommitLogThoroughInterval flushCommitLogTimed
    flushConsumeQueueLeastPages flushConsumeQueueThoroughInterval
    flushConsumerOffsetHistoryInterval flushConsumerOffsetInterval flushDelayOffsetInterval
    flushDiskType flushIntervalCommitLog flushIntervalConsumeQueue
    flushLeastPagesWhenWarmMapedFile forceRegister forceVerifyPropCRC forwardTimeout
    globalColdReadThreshold haFlowControlEnable haHousekeepingInterval haListenPort
    haMasterAddress haMaxGapNotInSync haMaxTimeSlaveNotCatchup haSendHeartbeatInterval
    haSlaveFallbehindMax haTransferBatchSize heartbeatThreadPoolNums
    heartbeatThreadPoolQueueCapacity highSpeedMode inBrokerContainer inSyncReplicas
    initAuthenticationUser initPopOffsetByCheckMsgInMem innerClientAuthenticationCredentials
    isolateLogEnable listenPort litePullMessageEnable litePullMessageThreadPoolNums
    litePullThreadPoolQueueCapacity loadBalancePollNameServerInterval
    loadBalanceProcessorThreadPoolNums loadBalanceThreadPoolQueueCapacity lockInStrictMode
    logicQueueForceSwapMapInterval logicQueueSwapMapInterval logicQueueSwapMapReserveFileNum
    logicalDiskSpaceCleanForciblyThreshold longPollingEnable mappedFileSizeCommitLog
    mappedFileSizeConsumeQueue mappedFileSizeConsumeQueueExt mappedFileSizeTimerLog
    mappedFileSwapEnable mapperFileSizeBatchConsumeQueue maxAsyncPutMessageRequests
    maxBatchDeleteFilesNum maxChecksumRange maxConsumeQueueScan maxDelayTime
    maxErrorRateOfBloomFilter maxFilterMessageSize maxHaTransferByteInSecond maxHashSlotNum
    maxIndexNum maxLmqConsumeQueueNum maxMessageSize maxMsgsNumBatch maxOffsetMapSize
    maxPopPollingSize maxReconnectIntervalTimeSeconds maxRecoveryCommitlogFiles
    maxSlaveResendLength maxStatsIdleTimeInMinutes maxTopicLength
    maxTransferBytesOnMessageInDisk maxTransferBytesOnMessageInMemory
    maxTransferCountOnMessageInDisk maxTransferCountOnMessageInMemory memTableFlushIntervalMs
    messageDelayLevel messageIndexEnable messageIndexSafe messageStorePlugIn
    metricGrpcExporterIntervalInMills metricGrpcExporterTimeOutInMills
    metricLoggingExporterIntervalInMills metricsExporterType metricsGrpcExporterHeader
    metricsGrpcExporterTarget metricsInDelta metricsLabel metricsOtelCardinalityLimit
    metricsPromExporterHost metricsPromExporterPort migrateAuthFromV1Enabled minInSyncReplicas
    msgTraceTopicName namesrvAddr notifyConsumerIdsChangedEnable offsetCheckInSlave
    osPageCacheBusyTimeOutMills popCkMaxBufferSize popCkOffsetMaxQueueSize popCkStayBufferTime
    popCkStayBufferTimeOut popConsumerFSServiceInit popConsumerKVServiceEnable
    popConsumerKVServiceInit popConsumerKVServiceLog popFromRetryProbability
    popInflightMessageThreshold popLongPollingForceNotifyInterval popPollingMapSize
    popPollingSize popResponseReturnActualRetryTopic popReviveMaxAttemptTimes
    popReviveMaxReturnSizePerRead preferredLeaderId printChannelGroups printChannelGroupsMinNum
    processReplyMessageThreadPoolNums pullBatchMaxMessageCount pullMessageThreadPoolNums
    pullThreadPoolQueueCapacity putConsumeQueueDataByFileChannel putMessageFutureThreadPoolNums
    putMessageTimeout putMsgIndexHightWater putThreadPoolQueueCapacity
    queryMessageThreadPoolNums queryThreadPoolQueueCapacity readOnlyCommitLogStorePaths
    readUnCommitted realTimeNotifyConsumerChange realTimePersistRocksDBConfig
    recallMessageEnable recheckReputOffsetFromCq recoverConcurrently recoverThreadPoolNums
    redeleteHangedFileInterval regionId registerBrokerTimeoutMills registerNameServerPeriod
    rejectPullConsumerEnable rejectTransactionMessage replicasPerDiskPartition
    replyThreadPoolQueueCapacity retrieveMessageFromPopRetryTopicV1 reviveAckWaitMs
    reviveInterval reviveMaxSlow reviveQueueNum reviveScanTime rmqAddressServerDomain
    rmqAddressServerSubGroup rocketmqHome rocksdbCQDoubleWriteEnable rocksdbCompressionType
    rocksdbFlushWalFrequency rocksdbWalFileRollingThreshold sampleCountThreshold sampleSteps
    scanAvailableNameSrv scheduleAsyncDeliverMaxPendingLimit
    scheduleAsyncDeliverMaxResendNum2Blocked searchBcqByCacheEnable sendHeartbeatTimeoutMillis
    sendMessageThreadPoolNums sendThreadPoolQueueCapacity serverAsyncSemaphoreValue
    serverCallbackExecutorThreads serverChannelMaxIdleTimeSeconds serverLoadBalancerEnable
    serverNettyWorkerGroupEnable serverOnewaySemaphoreValue serverPooledByteBufAllocatorEnable
    serverSelectorThreads serverSocketBacklog serverSocketRcvBufSize serverSocketSndBufSize
    serverWorkerThreads shortPollingTimeMills shutdownWaitTimeSeconds skipPreOnline
    skipWhenCKRePutReachMaxTimes slaveReadEnable slaveTimeout socksProxyConfig
    spinLockCollisionRetreatOptimalDegree splitRegistrationSize startAcceptSendRequestTimeStamp
    statRocksDBCQIntervalSec statefulAuthenticationCacheExpiredSecond
    statefulAuthenticationCacheMaxNum statefulAuthorizationCacheExpiredSecond
    statefulAuthorizationCacheMaxNum storePathBrokerIdentity storePathCommitLog
    storePathDLedgerCommitLog storePathEpochFile storePathRootDir storeReplyMessageEnable
    storeType subscriptionExpiredTimeout syncBrokerMemberGroupPeriod syncBrokerMetadataPeriod
    syncControllerMetadataPeriod syncFlushTimeout syncFromLastFile
    syncMasterFlushOffsetWhenStartup timerColdDataCheckIntervalMs timerCongestNumEachSlot
    timerEnableCheckMetrics timerEnableRetryUntilSuccess timerFlushIntervalMs
    timerGetMessageThreadNum timerInterceptDelayLevel timerMaxDelaySec timerMetricSmallThreshold
    timerPrecisionMs timerProgressLogIntervalMs timerPutMessageThreadNum timerRollWindowSlot
    timerSkipUnknownError timerStopEnqueue timerWheelEnable topicQueueLockNum totalReplicas
    traceOn traceTopicEnable transactionCheckInterval transactionCheckMax
    transactionMetricFlushInterval transactionOpBatchInterval transactionOpMsgMaxSize
    transactionTimeOut transferMsgByHeap transientStorePoolEnable transientStorePoolSize
    travelCqFileNumWhenGetMessage updateNameServerAddrPeriod useABSLock useEpollNativeSelector
    usePIDColdCtrStrategy useReentrantLockWhenPutMessage useServerSideResetOffset
    useStaticSubscription useTLS userCacheExpiredSecond userCacheMaxNum userCacheRefreshSecond
    validateSystemTopicWhenUpdateTopic waitTimeMillsInAckQueue waitTimeMillsInAdminBrokerQueue
    waitTimeMillsInHeartbeatQueue waitTimeMillsInLitePullQueue waitTimeMillsInPullQueue
    waitTimeMillsInSendQueue waitTimeMillsInTransactionQueue wakeCommitWhenPutMessage
    wakeFlushWhenPutMessage warmMapedFileEnable writeBufferHighWaterMark writeBufferLowWaterMark
    """.split()
)

# mqnamesrv: NamesrvConfig, NettyServerConfig and NettyClientConfig.
NAMESRV = frozenset(
    """
    bindAddress channelNotActiveInterval clientAsyncSemaphoreValue clientCallbackExecutorThreads
    clientChannelMaxIdleTimeSeconds clientCloseSocketIfTimeout clientOnewaySemaphoreValue
    clientPooledByteBufAllocatorEnable clientRequestThreadPoolNums
    clientRequestThreadPoolQueueCapacity clientSocketRcvBufSize clientSocketSndBufSize
    clientWorkerThreads clusterTest configBlackList configStorePath connectTimeoutMillis
    defaultThreadPoolNums defaultThreadPoolQueueCapacity deleteTopicWithBrokerRegistration
    disableCallbackExecutor disableNettyWorkerGroup enableAllTopicList enableControllerInNamesrv
    enableReconnectForGoAway enableShutdownGracefully enableTopicList kvConfigPath listenPort
    maxReconnectIntervalTimeSeconds needWaitForService notifyMinBrokerIdChanged
    orderMessageEnable productEnvName returnOrderTopicConfigToBroker rocketmqHome
    scanAvailableNameSrv scanNotActiveBrokerInterval serverAsyncSemaphoreValue
    serverCallbackExecutorThreads serverChannelMaxIdleTimeSeconds serverNettyWorkerGroupEnable
    serverOnewaySemaphoreValue serverPooledByteBufAllocatorEnable serverSelectorThreads
    serverSocketBacklog serverSocketRcvBufSize serverSocketSndBufSize serverWorkerThreads
    shutdownWaitTimeSeconds socksProxyConfig supportActingMaster unRegisterBrokerQueueCapacity
    useEpollNativeSelector useTLS waitSecondsForService writeBufferHighWaterMark
    writeBufferLowWaterMark
    """.split()
)

# RocketMQ 5's controller (mqcontroller, or inside mqnamesrv with enableControllerInNamesrv).
CONTROLLER = frozenset(
    """
    configBlackList configStorePath controllerDLegerGroup controllerDLegerPeers
    controllerDLegerSelfId controllerRequestThreadPoolQueueCapacity controllerStorePath
    controllerThreadPoolNums controllerType electMasterMaxRetryCount enableElectUncleanMaster
    jRaftControllerRPCAddr jRaftElectionTimeoutMs jRaftGroupId jRaftInitConf
    jRaftScanWaitTimeoutMs jRaftServerId jRaftSnapshotIntervalSecs mappedFileSize
    metricGrpcExporterIntervalInMills metricGrpcExporterTimeOutInMills
    metricLoggingExporterIntervalInMills metricsExporterType metricsGrpcExporterHeader
    metricsGrpcExporterTarget metricsInDelta metricsLabel metricsPromExporterHost
    metricsPromExporterPort notifyBrokerRoleChanged processReadEvent rocketmqHome
    scanInactiveMasterInterval scanNotActiveBrokerInterval
    """.split()
)


class ConfigError(ValueError):
    """A bad setting of a server's config; ``key`` is the property (or field) it came from."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


def parse_bool(text: str) -> bool:
    """A boolean property value: true or false, in any case (anything else is a ValueError)."""
    low = text.lower()
    if low not in ("true", "false"):
        raise ValueError("expected true or false")
    return low == "true"


def show_bool(value: bool) -> str:
    return "true" if value else "false"


def report_unused(
    keys: Iterable[str],
    *,
    honoured: Collection[str],
    accepted: Collection[str],
    source: str,
    logger: logging.Logger,
) -> None:
    """Log the keys of `source` that the server does not act on.

    Keys in `accepted` (RocketMQ's own, which rmq does not act on) are named together in one
    INFO line; any other key gets a WARNING naming the closest key in `honoured` or
    `accepted`, so a typo is seen. Nothing is logged when every key is acted on.
    """
    keys = list(keys)
    ignored = sorted(k for k in keys if k in accepted)
    if ignored:
        logger.info("%s: accepted and ignored (RocketMQ keys rmq does not act on): %s", source, ", ".join(ignored))
    known = {k.lower(): k for k in (*accepted, *honoured)}
    for key in keys:
        if key in accepted:
            continue
        close = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.75)
        if close:
            logger.warning("%s: unknown key %r ignored; did you mean %r?", source, key, known[close[0]])
        else:
            logger.warning("%s: unknown key %r ignored", source, key)
