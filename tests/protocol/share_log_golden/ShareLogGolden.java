// Prints golden bytes of the share-group records from Kafka 4.4's own generated classes:
// one line per case, "name key-hex value-hex", keys through MessageUtil.toCoordinatorTypePrefixedBytes
// and values through toVersionPrefixedBytes(0, ...) as CoordinatorRecordSerde writes them.
// tests/protocol/test_share_log.py holds the same cases as Python values and compares with golden.txt.
// Regenerate (from this directory, jars from tests/reference):
//   L=~/.cache/minibroker-tests/kafka-4.4.0/libs; CP=$(ls $L/*.jar | tr '\n' ':')
//   java -Dfile.encoding=UTF-8 -cp "$CP" ShareLogGolden.java > golden.txt
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.share.generated.*;
import org.apache.kafka.coordinator.group.generated.*;
import java.util.*;

public class ShareLogGolden {
    static String hex(byte[] b) { StringBuilder s = new StringBuilder(); for (byte x : b) s.append(String.format("%02x", x)); return s.toString(); }
    static void out(String name, ApiMessage key, ApiMessage value) {
        System.out.println(name + " " + hex(MessageUtil.toCoordinatorTypePrefixedBytes(key)) + " "
            + hex(MessageUtil.toVersionPrefixedBytes((short) 0, value)));
    }
    public static void main(String[] a) {
        Uuid t1 = new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L);
        Uuid t2 = new Uuid(0x1111111111111111L, 0x2222222222222222L);
        out("snapshot", new ShareSnapshotKey().setGroupId("grüppe").setTopicId(t1).setPartition(3),
            new ShareSnapshotValue().setSnapshotEpoch(2).setStateEpoch(1).setLeaderEpoch(7).setStartOffset(100)
                .setCreateTimestamp(1700000000000L).setWriteTimestamp(1700000000500L)
                .setStateBatches(List.of(
                    new ShareSnapshotValue.StateBatch().setFirstOffset(100).setLastOffset(109).setDeliveryState((byte) 0).setDeliveryCount((short) 2),
                    new ShareSnapshotValue.StateBatch().setFirstOffset(110).setLastOffset(110).setDeliveryState((byte) 4).setDeliveryCount((short) 5))));
        out("snapshot_dcc", new ShareSnapshotKey().setGroupId("g").setTopicId(t2).setPartition(0),
            new ShareSnapshotValue().setSnapshotEpoch(0).setStateEpoch(0).setLeaderEpoch(-1).setStartOffset(-1)
                .setDeliveryCompleteCount(7).setCreateTimestamp(5).setWriteTimestamp(6).setStateBatches(List.of()));
        out("update_dcc", new ShareUpdateKey().setGroupId("g").setTopicId(t1).setPartition(49),
            new ShareUpdateValue().setSnapshotEpoch(3).setLeaderEpoch(1).setStartOffset(-1).setDeliveryCompleteCount(300)
                .setStateBatches(List.of(new ShareUpdateValue.StateBatch().setFirstOffset(5).setLastOffset(9).setDeliveryState((byte) 2).setDeliveryCount((short) 1))));
        out("update", new ShareUpdateKey().setGroupId("g").setTopicId(t1).setPartition(0),
            new ShareUpdateValue().setSnapshotEpoch(1).setLeaderEpoch(0).setStartOffset(42).setStateBatches(List.of()));
        out("member_metadata", new ShareGroupMemberMetadataKey().setGroupId("g").setMemberId("m-1"),
            new ShareGroupMemberMetadataValue().setRackId(null).setClientId("console-share-consumer").setClientHost("/127.0.0.1")
                .setSubscribedTopicNames(List.of("t", "ü")));
        out("member_metadata_rack", new ShareGroupMemberMetadataKey().setGroupId("g").setMemberId("m-2"),
            new ShareGroupMemberMetadataValue().setRackId("r1").setClientId("").setClientHost("/::1")
                .setSubscribedTopicNames(List.of()));
        out("group_metadata", new ShareGroupMetadataKey().setGroupId("g"),
            new ShareGroupMetadataValue().setEpoch(3).setMetadataHash(-6148914691236517206L));
        out("target_metadata", new ShareGroupTargetAssignmentMetadataKey().setGroupId("g"),
            new ShareGroupTargetAssignmentMetadataValue().setAssignmentEpoch(3));
        out("target_metadata_ts", new ShareGroupTargetAssignmentMetadataKey().setGroupId("g"),
            new ShareGroupTargetAssignmentMetadataValue().setAssignmentEpoch(4).setAssignmentTimestamp(1700000000123L));
        out("target_member", new ShareGroupTargetAssignmentMemberKey().setGroupId("g").setMemberId("m-1"),
            new ShareGroupTargetAssignmentMemberValue().setTopicPartitions(List.of(
                new ShareGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(t1).setPartitions(List.of(0, 2)),
                new ShareGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(t2).setPartitions(List.of(1)))));
        out("current_member", new ShareGroupCurrentMemberAssignmentKey().setGroupId("g").setMemberId("m-1"),
            new ShareGroupCurrentMemberAssignmentValue().setMemberEpoch(3).setPreviousMemberEpoch(2).setState((byte) 0)
                .setAssignedPartitions(List.of(new ShareGroupCurrentMemberAssignmentValue.TopicPartitions().setTopicId(t1).setPartitions(List.of(0, 1, 2)))));
        out("state_partition_metadata", new ShareGroupStatePartitionMetadataKey().setGroupId("g"),
            new ShareGroupStatePartitionMetadataValue()
                .setInitializingTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo().setTopicId(t2).setTopicName("new").setPartitions(List.of(0, 1))))
                .setInitializedTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo().setTopicId(t1).setTopicName("t").setPartitions(List.of(0, 1, 2))))
                .setDeletingTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicInfo().setTopicId(Uuid.ZERO_UUID).setTopicName("gone"))));
    }
}
